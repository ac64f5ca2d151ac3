"""MATH-500 (Lightman et al. 2023 subset of MATH, Hendrycks et al. 2021).

The OPCT authors' folder has a ready ``prompt`` column that wraps ``problem`` in their instruction
(:data:`MATH_PROMPT_TEMPLATE`: "... The last line of your response should be of the form
"Answer: $ANSWER" ..."). Loading also works for the upstream ``HuggingFaceH4/MATH-500`` layout
(``problem``/``answer`` columns, no ``prompt``): the template is then applied here, so
``HuggingFaceH4/MATH-500`` read from the hub gives the same prompts as the authors' folder.
"""

from __future__ import annotations

import os
from typing import Any

from opct.datasets.base import DatasetFormatError, EvalItem, shared_data_dir, user_message
from opct.datasets.tabular import iter_rows, require_columns

__all__ = ["EXPECTED_COLUMNS", "MATH_PROMPT_TEMPLATE", "load_math500"]

#: What a MATH-500 file needs, for error messages.
EXPECTED_COLUMNS = ("prompt or problem, and correct_answer or answer (optional: subject, level, unique_id); "
                    "HuggingFaceH4/MATH-500 has problem and answer")

MATH_PROMPT_TEMPLATE = (
    "Solve the following math problem step by step. The last line of your response should be of the "
    'form "Answer: $ANSWER" (without quotes) where $ANSWER is the answer to the problem.\n\n{problem}\n\n'
    'Remember to put your answer on its own line after "Answer:", and you do not need to use a '
    "\\boxed command."
)


def load_math500(
    path: str | os.PathLike[str] | None = None, *, fmt: str | None = None, split: str | None = None
) -> list[EvalItem]:
    """Load MATH-500 items.

    ``meta`` holds ``answer`` (gold, LaTeX), ``subject``, ``level`` and ``unique_id``; the id is the
    row's ``unique_id`` (e.g. ``test/precalculus/807.json``) when present. ``path`` defaults to
    ``shared_data_dir() / "math-500"``; any source of :func:`opct.datasets.tabular.iter_rows` works
    (a JSONL, Parquet or CSV file, a ``save_to_disk`` folder, a hub id such as
    ``HuggingFaceH4/MATH-500@<revision>``).
    """
    path = path if path is not None else shared_data_dir() / "math-500"
    items = []
    for index, row in enumerate(iter_rows(path, fmt, split)):
        v = row.values
        if index == 0:
            require_columns(path, row, [("correct_answer", "answer"), ("prompt", "problem")], EXPECTED_COLUMNS)
        gold_col = "correct_answer" if "correct_answer" in v else "answer"
        gold = v.get(gold_col)
        if gold is None or not str(gold).strip():
            raise DatasetFormatError.at(path, row, "missing or empty gold answer", field=gold_col)
        prompt = v.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            problem = v.get("problem")
            if not isinstance(problem, str) or not problem.strip():
                raise DatasetFormatError.at(path, row, "need a non-empty 'prompt' or 'problem'", field="problem")
            prompt = MATH_PROMPT_TEMPLATE.format(problem=problem.strip())
        meta: dict[str, Any] = {"answer": str(gold).strip()}
        for key in ("subject", "level", "unique_id"):
            if key in v:
                meta[key] = v[key]
        item_id = str(v.get("unique_id") or f"math-500/{index}")
        items.append(EvalItem(item_id, user_message(prompt), meta))
    if not items:
        raise DatasetFormatError(path, "no rows found", hint=f"expected columns: {EXPECTED_COLUMNS}")
    return items
