"""GPQA-Diamond (Rein et al. 2023): 198 four-option questions, CC BY 4.0.

Two layouts are read, from any source of :func:`opct.datasets.tabular.iter_rows` (a ``save_to_disk``
folder, a JSONL or Parquet file, a hub id):

* the OPCT authors' prepared folder (``../shared/data/gpqa-diamond``): a ready ``prompt`` (the
  "Answer: $LETTER" instruction and the shuffled options) and the ``correct_answer`` letter;
* the upstream layout of ``Idavidrein/gpqa`` (config ``gpqa_diamond``, gated: accept its terms and set
  ``HF_TOKEN``): ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``. The options are shuffled
  here exactly as the authors' ``prepare_gpqa_dataset.py`` did (one ``random.Random(42)`` over the rows
  in order, ``[correct, incorrect 1, 2, 3]`` shuffled), so the same rows give the same prompts and
  letters as the prepared folder.

GPQA's authors ask that its questions not be published in plain text: do not log item prompts.
"""

from __future__ import annotations

import os
import random
import string
from collections.abc import Iterable

from opct.datasets.base import DatasetFormatError, EvalItem, shared_data_dir, user_message
from opct.datasets.multiple_choice import MC_PROMPT_TEMPLATE, parse_options_from_prompt
from opct.datasets.tabular import Row, iter_rows

__all__ = ["EXPECTED_COLUMNS", "SHUFFLE_SEED", "UPSTREAM_COLUMNS", "is_upstream_layout", "load_gpqa_diamond", "upstream_options"]

#: The seed of the authors' option shuffle (``prepare_gpqa_dataset.py``).
SHUFFLE_SEED = 42
#: The columns of ``Idavidrein/gpqa`` that the upstream layout needs.
UPSTREAM_COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
PREPARED_COLUMNS = ("prompt", "correct_answer")
EXPECTED_COLUMNS = (f"{', '.join(PREPARED_COLUMNS)} (the OPCT authors' folder; optional question, subdomain), "
                    f"or {', '.join(UPSTREAM_COLUMNS)} (Idavidrein/gpqa)")
LETTERS = "ABCD"


def load_gpqa_diamond(
    path: str | os.PathLike[str] | None = None, *, fmt: str | None = None, split: str | None = None,
    seed: int = SHUFFLE_SEED,
) -> list[EvalItem]:
    """Load GPQA-Diamond as :class:`EvalItem` objects with ids ``gpqa-diamond/<row index>``.

    ``meta`` holds ``answer`` (the gold letter), ``subject`` (the subdomain), ``letters`` and ``options``
    (parsed back from the prompt; None if that fails). ``path`` defaults to
    ``shared_data_dir() / "gpqa-diamond"``; ``seed`` is the option shuffle's for the upstream layout.
    A file with neither layout raises :class:`DatasetFormatError` naming the columns it needs.
    """
    path = path if path is not None else shared_data_dir() / "gpqa-diamond"
    rng = random.Random(seed)
    upstream = False
    items = []
    for index, row in enumerate(iter_rows(path, fmt, split)):
        if index == 0:
            upstream = _layout(path, row)
        prompt, gold, subject = _upstream_row(path, row, rng) if upstream else _prepared_row(path, row)
        meta = {"answer": gold, "letters": LETTERS, "subject": subject, "options": parse_options_from_prompt(prompt)}
        items.append(EvalItem(f"gpqa-diamond/{index}", user_message(prompt), meta))
    if not items:
        raise DatasetFormatError(path, "no rows found", hint=f"expected columns: {EXPECTED_COLUMNS}")
    return items


def _layout(path: object, row: Row) -> bool:
    """True for the upstream layout, False for the prepared one; neither is an error."""
    cols = set(row.values)
    if set(PREPARED_COLUMNS) <= cols:
        return False
    if set(UPSTREAM_COLUMNS) <= cols:
        return True
    near = PREPARED_COLUMNS if cols & set(PREPARED_COLUMNS) else UPSTREAM_COLUMNS
    missing = next(c for c in near if c not in cols)
    raise DatasetFormatError(str(path), f"missing column {missing!r}", field=missing,
                             hint=f"expected columns: {EXPECTED_COLUMNS}; found: {', '.join(sorted(cols)) or 'none'}")


def _text(path: object, row: Row, column: str) -> str:
    value = row.values.get(column)
    if not isinstance(value, str) or not value.strip():
        raise DatasetFormatError.at(str(path), row, "missing or empty", field=column)
    return value


def _prepared_row(path: object, row: Row) -> tuple[str, str, object]:
    prompt = _text(path, row, "prompt")
    gold = _text(path, row, "correct_answer").strip().upper()
    if gold not in LETTERS:
        raise DatasetFormatError.at(str(path), row, f"expected a letter A-D, got {gold!r}", field="correct_answer")
    return prompt, gold, row.values.get("subdomain")


def is_upstream_layout(columns: Iterable[str]) -> bool:
    """Whether a row's columns hold the upstream GPQA layout (``Question``, ``Correct Answer``,
    ``Incorrect Answer 1..3``), as ``Idavidrein/gpqa`` on the hub has it."""
    return set(UPSTREAM_COLUMNS) <= set(columns)


def upstream_options(path: object, row: Row, rng: random.Random) -> tuple[str, list[str], str, object]:
    """One upstream row as the authors prepared it: ``(question, options, gold letter, subject)``, the
    options ``[correct, *incorrect]`` shuffled by ``rng`` (one generator over the rows in order)."""
    correct, *incorrect = (_text(path, row, c) for c in UPSTREAM_COLUMNS[1:])
    options = [correct, *incorrect]
    rng.shuffle(options)
    subject = row.values.get("Subdomain", row.values.get("High-level domain", ""))
    return _text(path, row, "Question"), options, LETTERS[options.index(correct)], subject


def _upstream_row(path: object, row: Row, rng: random.Random) -> tuple[str, str, object]:
    """The authors' preparation of one upstream row: shuffle ``[correct, *incorrect]``, then the MC prompt
    (question and options as written, not stripped, as in their script)."""
    question, options, gold, subject = upstream_options(path, row, rng)
    lines = "\n".join(f"{letter}) {text}" for letter, text in zip(string.ascii_uppercase, options, strict=False))
    prompt = MC_PROMPT_TEMPLATE.format(question=question, options=lines, letters=LETTERS)
    return prompt, gold, subject
