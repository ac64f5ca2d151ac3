"""Multiple-choice benchmarks, MMLU-style (GPQA-Diamond, with the same prompt, is :mod:`opct.datasets.diamond`).

Prompt format (:data:`MC_PROMPT_TEMPLATE`, zero-shot chain of thought, the same wording as the OPCT
authors' GPQA wrapper so that all MC benchmarks are graded by the same "Answer: X" line)::

    Answer the following multiple choice question. The last line of your response should be of the
    following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by
    step before answering.

    <question>

    A) <option A>
    B) <option B>
    ...

Each item's ``meta`` holds ``answer`` (gold letter), ``options`` (list of option texts, A first),
``letters`` (the valid letters) and, when available, ``subject``.
"""

from __future__ import annotations

import itertools
import os
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.datasets.base import DatasetFormatError, EvalItem, user_message
from opct.datasets.tabular import Row, decoded_cell, iter_rows

__all__ = [
    "ANSWER_FORMATS",
    "MC_PROMPT_TEMPLATE",
    "MCQuestion",
    "format_mc_prompt",
    "load_multiple_choice",
    "parse_options_from_prompt",
    "read_mc_questions",
]

MC_PROMPT_TEMPLATE = (
    "Answer the following multiple choice question. The last line of your response should be of the "
    "following format: 'Answer: $LETTER' (without quotes) where LETTER is one of {letters}. "
    "Think step by step before answering.\n\n{question}\n\n{options}"
)


def format_mc_prompt(question: str, options: Sequence[str], template: str = MC_PROMPT_TEMPLATE) -> str:
    """Render a question and its options (lettered A, B, ...) with ``template``.

    The template may use ``{question}``, ``{options}`` (one ``"X) text"`` line per option) and
    ``{letters}`` (e.g. ``"ABCD"``).
    """
    letters = string.ascii_uppercase[: len(options)]
    lines = "\n".join(f"{letter}) {text}" for letter, text in zip(letters, options, strict=True))
    return template.format(question=question.strip(), options=lines, letters=letters)


#: How a question may be asked and read (:attr:`MCQuestion.answer_format`).
ANSWER_FORMATS = ("letter", "words")


@dataclass(frozen=True)
class MCQuestion:
    """One multiple-choice question: ``options`` in letter order (A first), ``answer`` the gold letter.

    ``answer_format`` says how it is asked and read: ``"letter"`` (the options shown with their letters, the
    reply's letter read) or ``"words"`` (asked open, the reply read by the one option it names in words:
    :mod:`opct.datasets.basic_questions`)."""

    id: str
    question: str
    options: tuple[str, ...]
    answer: str
    subject: Any = None
    source: str = ""
    answer_format: str = "letter"


def read_mc_questions(
    path: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    split: str | None = None,
    question: str = "question",
    options: str | None = None,
    option_columns: Sequence[str] | None = None,
    answer: str = "answer",
    id_column: str | None = None,
    subject: str | None = None,
    name: str | None = None,
    default_id: Callable[[int, Row], str] | None = None,
) -> list[MCQuestion]:
    """The multiple-choice reader every loader uses (MMLU-style files, sycophancy's questions).

    Column mapping:
      * ``question``: the question text column.
      * options: either ``options`` (one column holding a list, or a JSON/Python-literal string of a
        list) or ``option_columns`` (one column per option, e.g. ``["A", "B", "C", "D"]``). When
        neither is given, a ``choices``/``options`` list column or the columns ``A``, ``B``[, ``C``...]
        are used if present (decided on the first row).
      * ``answer``: a letter (``"B"``, ``"(b)"``) or a 0-based index (``1`` or ``"1"``).
      * ``id_column`` (optional) and ``subject`` (optional). A row without an id gets
        ``default_id(row index, row)``, by default ``"<name>/<row index>"``.
      * an ``answer_format`` column, where a row has one: ``letter`` (the default) or ``words``
        (:attr:`MCQuestion.answer_format`).

    ``fmt`` is ``csv``/``jsonl``/``json``/``parquet``/``hf_disk`` (guessed from the path when None).
    Bad rows raise :class:`DatasetFormatError` naming the file, line/row and field.
    """
    name = name or Path(path).stem
    out: list[MCQuestion] = []
    for index, row in enumerate(iter_rows(path, fmt, split)):
        cols = row.values
        if index == 0:  # a misspelt --question is named as such, never blamed on the options
            missing = [(col, flag) for col, flag in ((question, "--question"), (answer, "--answer"),
                                                     (id_column, "--id-column"), (subject, None))
                       if col is not None and col not in cols]
            also = "; also missing: " + ", ".join(repr(c) for c, _ in missing) if missing else ""
            options, option_columns = _resolve_option_columns(path, row, options, option_columns, also)
            for col, flag in missing:
                _fail(path, row, col, f"column missing; columns are {sorted(cols)}", "pass the right column name"
                      + (f" (opct pairs build {flag} COLUMN)" if flag else ""))
        q = cols.get(question)
        if not isinstance(q, str) or not q.strip():
            _fail(path, row, question, "empty or not text")
        opts = _row_options(path, row, options, option_columns)
        gold = _row_answer(path, row, answer, len(opts))
        raw_id = cols.get(id_column) if id_column else None
        if raw_id is not None and str(raw_id) != "":
            item_id = str(raw_id)
        else:
            item_id = default_id(index, row) if default_id else f"{name}/{index}"
        answer_format = str(cols.get("answer_format") or "letter")
        if answer_format not in ANSWER_FORMATS:
            _fail(path, row, "answer_format", f"{answer_format!r} is not one of {', '.join(ANSWER_FORMATS)}",
                  "use letter (options shown with letters) or words (asked open, read by the option named)")
        out.append(MCQuestion(item_id, q.strip(), tuple(opts), gold, cols.get(subject) if subject else None, name,
                              answer_format))
    if not out:
        raise DatasetFormatError(path, "no rows found")
    return out


def load_multiple_choice(
    path: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    split: str | None = None,
    question: str = "question",
    options: str | None = None,
    option_columns: Sequence[str] | None = None,
    answer: str = "answer",
    id_column: str | None = None,
    subject: str | None = None,
    template: str = MC_PROMPT_TEMPLATE,
    name: str | None = None,
) -> list[EvalItem]:
    """Load an MMLU-style multiple-choice file as :class:`EvalItem` objects (prompt: ``template``).

    Columns as in :func:`read_mc_questions`; ``meta`` holds ``answer``, ``options``, ``letters`` and,
    with ``subject``, the subject.
    """
    items = []
    for q in read_mc_questions(path, fmt=fmt, split=split, question=question, options=options,
                               option_columns=option_columns, answer=answer, id_column=id_column, subject=subject,
                               name=name):
        meta: dict[str, Any] = {"answer": q.answer, "options": list(q.options),
                                "letters": string.ascii_uppercase[: len(q.options)]}
        if subject:
            meta["subject"] = q.subject
        items.append(EvalItem(q.id, user_message(format_mc_prompt(q.question, q.options, template)), meta))
    return items


def _fail(path: Any, row: Row, field: str | None, problem: str, hint: str | None = None) -> None:
    raise DatasetFormatError.at(path, row, problem, field=field, hint=hint)


def _resolve_option_columns(
    path: Any, row: Row, options: str | None, option_columns: Sequence[str] | None, also: str = ""
) -> tuple[str | None, Sequence[str] | None]:
    cols = row.values
    if options is not None and option_columns is not None:
        raise DatasetFormatError(path, "pass either options= or option_columns=, not both")
    if options is None and option_columns is None:
        for candidate in ("choices", "options"):
            if candidate in cols:
                return candidate, None
        letters = list(itertools.takewhile(lambda c: c in cols, string.ascii_uppercase))
        if len(letters) >= 2:  # columns A, B[, C...]
            return None, letters
        _fail(path, row, None, f"cannot find the options; columns are {sorted(cols)}{also}",
              "name them: a list column (options='<column>'; opct pairs build --options COLUMN) or one column per "
              "option (option_columns=['A','B','C','D']; opct pairs build --option-column A --option-column B ...)")
    if options is not None and options not in cols:
        _fail(path, row, options, f"column missing; columns are {sorted(cols)}")
    for col in option_columns or ():
        if col not in cols:
            _fail(path, row, col, f"option column missing; columns are {sorted(cols)}")
    return options, option_columns


def _row_options(path: Any, row: Row, options: str | None, option_columns: Sequence[str] | None) -> list[str]:
    if option_columns is not None:
        opts = [row.values.get(c) for c in option_columns]
        for c, value in zip(option_columns, opts, strict=True):
            if value is None or (isinstance(value, str) and not value.strip()):
                _fail(path, row, c, "empty option")
        return [str(v).strip() for v in opts]
    assert options is not None
    raw = decoded_cell(path, row, options, "options string is not a JSON or Python list", python_literal=True,
                       hint='write it as ["opt A", "opt B", ...]')
    if not isinstance(raw, (list, tuple)) or len(raw) < 2:
        _fail(path, row, options, f"expected a list of at least 2 options, got {type(raw).__name__}")
    if len(raw) > 26:
        _fail(path, row, options, "more than 26 options")
    return [str(v).strip() for v in raw]


def _row_answer(path: Any, row: Row, column: str, n_options: int) -> str:
    raw = row.values.get(column)
    letters = string.ascii_uppercase[:n_options]
    if isinstance(raw, bool):
        raw = None
    is_number = isinstance(raw, int) or (isinstance(raw, float) and raw.is_integer())
    if is_number or (isinstance(raw, str) and re.fullmatch(r"\s*\d+\s*", raw)):
        idx = int(raw)  # type: ignore[arg-type]
    elif isinstance(raw, str) and (m := re.fullmatch(r"\s*\(?([A-Za-z])\)?\.?\s*", raw)):
        idx = letters.find(m.group(1).upper())
        if idx < 0:
            _fail(path, row, column, f"answer letter {raw.strip()!r} is not one of {letters}")
    else:
        _fail(path, row, column, f"expected a letter {letters[0]}-{letters[-1]} or a 0-based index, got {raw!r}")
    if not 0 <= idx < n_options:
        _fail(path, row, column, f"answer index {idx} out of range for {n_options} options",
              "indices are 0-based")
    return letters[idx]


def parse_options_from_prompt(prompt: str, letters: str = "ABCD") -> list[str] | None:
    """Recover option texts from a prompt whose options are the trailing ``"A) ..."`` lines.

    Looks for the last line starting ``"A)"`` and then, in order, a later line starting with each
    following letter; an option's text runs until the next option line. Returns None when the
    lettered lines are not all found.
    """
    lines = prompt.splitlines()
    first = [i for i, line in enumerate(lines) if line.startswith(f"{letters[0]})")]
    if not first:
        return None
    starts = [first[-1]]
    for letter in letters[1:]:
        nxt = next((i for i in range(starts[-1] + 1, len(lines)) if lines[i].startswith(f"{letter})")), None)
        if nxt is None:
            return None
        starts.append(nxt)
    bounds = [*starts, len(lines)]
    return ["\n".join(lines[s : bounds[k + 1]])[2:].strip() for k, s in enumerate(starts)]
