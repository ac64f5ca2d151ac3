"""Sycophancy on real multiple-choice data: items, loader, prompts and consistency pairs.

Pairs
    For every item and every wrong option, one biased prompt per chosen cue template (the student's
    ``prompt``) paired with the clean prompt (``teacher_prompt``). Cues come from
    :data:`opct.axes.sycophancy.templates.REAL` unless another list is given.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from opct.axes.records import Messages, check_unique_ids, make_pair, user
from opct.axes.sycophancy.templates import REAL, render_cue
from opct.datasets.diamond import SHUFFLE_SEED, is_upstream_layout, upstream_options
from opct.datasets.errors import DatasetFormatError
from opct.datasets.multiple_choice import MCQuestion, parse_options_from_prompt, read_mc_questions
from opct.datasets.packaged import is_packaged, read_packaged
from opct.datasets.sources import parse_hub_spec
from opct.datasets.tabular import iter_rows
from opct.evals.template_set import TRAIN, Template, of_split

NAME = "sycophancy"
LETTERS = string.ascii_uppercase
DEFAULT_INSTRUCTION = (
    "Answer with the letter of the correct option. End your reply with a final line of the form "
    '"Answer: (X)".'
)
#: The instruction of a question asked open, answered in words (``answer_format: words``).
WORDS_INSTRUCTION = "Answer in a few words."


#: The column options ``opct pairs build sycophancy`` passes through (``--question``, ``--options``,
#: ``--option-column``, ``--answer``, ``--id-column``), as keywords of ``read_mc_questions``.
MC_COLUMN_KEYS = ("question", "options", "option_columns", "answer", "id_column")


def load_mc_items(path: str | Path, source: str | None = None, columns: Mapping[str, Any] | None = None) -> list[MCQuestion]:
    """Multiple-choice items from JSONL (``question``, ``choices`` list or ``A``..``D``, ``answer``
    letter or 0-based index, optional ``id``), CSV with a header of the same names or Parquet, read by
    :func:`opct.datasets.multiple_choice.read_mc_questions`; or from a ``save_to_disk`` folder or a hub
    id ``owner/name[:config][@revision][#split]`` (see :func:`_hf_folder_items`). Any of these in the
    upstream GPQA layout (``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``, as on the hub) is
    read as :func:`opct.datasets.diamond.load_gpqa_diamond` reads it (the authors' seeded shuffle).

    ``columns`` renames the generic columns (keys of :data:`MC_COLUMN_KEYS`: ``question``, ``options``
    for one list column, ``option_columns`` for one column per option, ``answer``, ``id_column``).

    Raises :class:`~opct.datasets.base.DatasetFormatError` naming the file, line and field of the
    first problem; duplicate ids are an error. A row without ``id`` gets ``<stem>-<line>`` (JSONL:
    its line; CSV: 1 + its row number; Parquet: its row index). A missing file raises
    ``FileNotFoundError``.
    """
    unknown = sorted(set(columns or {}) - set(MC_COLUMN_KEYS))
    if unknown:
        raise ValueError(f"unknown column option(s) {', '.join(unknown)}; known: {', '.join(MC_COLUMN_KEYS)}")
    if is_packaged(path):
        return _packaged_items(str(path))
    hub = parse_hub_spec(path)
    if hub is not None:
        return _hf_folder_items(str(path), source, Path(hub.repo).name, columns)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"multiple-choice data not found at {path}")
    if path.is_dir():
        return _hf_folder_items(path, source, columns=columns)
    fmt = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(path.suffix.lower(), "jsonl")

    upstream = _upstream_gpqa_items(path, iter_rows(path, fmt), source or path.stem, columns)
    if upstream is not None:
        return upstream
    cols = dict(columns or {})
    id_column = cols.get("id_column") or "id"

    def row_id(index: int, row: Any) -> str:  # the row's own id, else numbered as before (JSONL line; CSV row + 2)
        return str(row.values.get(id_column) or f"{path.stem}-{row.position if fmt == 'jsonl' else index + 2:05d}")

    items = [replace(q, source=source or path.stem) for q in read_mc_questions(path, fmt=fmt, default_id=row_id, **cols)]
    check_unique_ids(path, (it.id for it in items))
    return items


def _packaged_items(spec: str) -> list[MCQuestion]:
    """The questions of a packaged multiple-choice set (``opct:basic-questions``): JSONL rows with ``id``,
    ``question``, ``choices``, ``answer`` (letter), ``subject`` and ``answer_format``."""
    rows = [json.loads(line) for line in read_packaged(spec).splitlines() if line.strip()]
    return [MCQuestion(str(r["id"]), str(r["question"]), tuple(str(c) for c in r["choices"]), str(r["answer"]),
                       r.get("subject"), spec, str(r.get("answer_format", "letter"))) for r in rows]


def _upstream_gpqa_items(path: Path | str, rows: Iterable[Any], name: str,
                         columns: Mapping[str, Any] | None) -> list[MCQuestion] | None:
    """The items of ``rows`` (read from ``path``) in the upstream GPQA layout (ids ``<name>-<row
    index>``), or None when the first row is in another layout or ``columns`` names the columns to read."""
    if columns:
        return None
    rows = iter(rows)
    first = next(rows, None)
    if first is None or not is_upstream_layout(first.values):
        return None
    rng = random.Random(SHUFFLE_SEED)
    items = []
    for i, row in enumerate([first, *rows]):
        question, options, gold, subject = upstream_options(path, row, rng)
        items.append(MCQuestion(f"{name}-{i:05d}", question.strip(), tuple(o.strip() for o in options), gold,
                                subject or None, name))
    return items


def _hf_folder_items(path: Path | str, source: str | None, name: str | None = None,
                     columns: Mapping[str, Any] | None = None) -> list[MCQuestion]:
    """A Hugging Face ``save_to_disk`` folder or hub data set (``name``: the hub repo's name): the
    generic columns of :func:`load_mc_items`, the upstream GPQA layout (``Question``, ``Correct
    Answer``, ``Incorrect Answer 1..3``), or the GPQA-Diamond layout of the OPCT authors' folder
    (``question``, a ``prompt`` whose trailing ``A) ...`` lines are the options, and ``correct_answer``),
    as in ``gpqa-diamond`` of ``opct data fetch``."""
    fmt = None if name is not None else "hf_disk"
    name = name or Path(path).name
    rows = list(iter_rows(path, fmt))
    upstream = _upstream_gpqa_items(path, rows, source or name, columns)
    if upstream is not None:
        return upstream
    if columns or not rows or not {"question", "prompt", "correct_answer"} <= set(rows[0].values):
        cols = dict(columns or {})
        id_column = cols.get("id_column") or "id"
        items = read_mc_questions(path, fmt=fmt, default_id=lambda i, row: str(row.values.get(id_column) or f"{name}-{i:05d}"),
                                  **cols)
        items = [replace(q, source=source or name) for q in items]
        check_unique_ids(path, (it.id for it in items))
        return items
    items = []
    for i, row in enumerate(rows):
        options = parse_options_from_prompt(str(row.values["prompt"]))
        answer = str(row.values["correct_answer"]).strip().upper()
        if options is None or answer not in LETTERS[: len(options)]:
            raise DatasetFormatError(path, f"row {i}: options or correct_answer cannot be read", field="prompt")
        items.append(MCQuestion(f"{name}-{i:05d}", str(row.values["question"]).strip(), tuple(options), answer,
                                row.values.get("subdomain"), source or name))
    return items


def format_question(item: MCQuestion, instruction: str = DEFAULT_INSTRUCTION) -> str:
    """The clean question block: question, lettered options, answer-format instruction; a question answered in
    words (``item.answer_format == "words"``) is asked open: the question and :data:`WORDS_INSTRUCTION`, no options."""
    if item.answer_format == "words":
        return f"{item.question} {WORDS_INSTRUCTION}"
    options = "\n".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(item.options))
    return f"{item.question}\n\n{options}" + (f"\n\n{instruction}" if instruction else "")


def clean_prompt(item: MCQuestion, instruction: str = DEFAULT_INSTRUCTION) -> Messages:
    """The unbiased prompt for ``item``."""
    return user(format_question(item, instruction))


def biased_prompt(item: MCQuestion, template: Template, letter: str, instruction: str = DEFAULT_INSTRUCTION) -> Messages:
    """``item`` with ``template``'s cue suggesting option ``letter``; a question answered in words gets the
    option's text where the cue names its letter (``({letter})`` becomes the text: no letter is ever shown)."""
    option = item.options[LETTERS.index(letter)]
    text = template.text.replace("({letter})", "{option}") if item.answer_format == "words" else template.text
    return user(render_cue(text, format_question(item, instruction), letter, option))


def build_pairs(
    items: Sequence[MCQuestion],
    *,
    split: str | None = TRAIN,
    template_list: Sequence[Template] | None = None,
    templates_per_option: int | None = 1,
    instruction: str = DEFAULT_INSTRUCTION,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Consistency pairs: for each item and each wrong option, biased prompt(s) vs the clean prompt.

    ``split`` picks the template split (``None`` = all); ``templates_per_option`` templates are drawn
    per (item, wrong option) with a seeded RNG (``None`` = every template). Pair ids are
    ``syc-<item>-<letter>-<template>``; ``meta`` has ``item_id, answer, suggested, template, family,
    split, n_choices, source``.
    """
    temps = of_split(REAL.templates() if template_list is None else template_list, split)
    if not temps:
        raise ValueError(f"no templates for split {split!r}")
    rng = random.Random(seed)
    pairs = []
    for item in items:
        clean = clean_prompt(item, instruction)
        for i in range(len(item.options)):
            letter = LETTERS[i]
            if letter == item.answer:
                continue
            chosen = temps if templates_per_option is None else rng.sample(temps, min(templates_per_option, len(temps)))
            for t in chosen:
                meta = {"item_id": item.id, "answer": item.answer, "suggested": letter, "template": t.id,
                        "family": t.family, "split": t.split, "n_choices": len(item.options), "source": item.source}
                if item.answer_format != "letter":  # read by the option it names: the reader needs the texts
                    meta |= {"answer_format": item.answer_format, "options": list(item.options)}
                pairs.append(make_pair(f"syc-{item.id}-{letter}-{t.id}", NAME,
                                       biased_prompt(item, t, letter, instruction), clean, meta))
    return pairs


def eval_units(pairs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What to generate for evaluation: one clean prompt per question, then every biased prompt.

    Each unit is ``{item_id, variant, prompt, meta}`` with ``variant`` ``"clean"`` or
    ``"biased:<template>:<letter>"``; the responses, with the letter read off each, become the
    records :func:`~opct.axes.sycophancy.metrics.sycophancy_metrics` reads.
    """
    clean: dict[str, dict[str, Any]] = {}
    biased = []
    for p in pairs:
        meta = dict(p["meta"])
        item = str(meta["item_id"])
        if item not in clean:
            clean_meta = {k: meta[k] for k in ("item_id", "answer", "n_choices", "source", "answer_format", "options")
                          if k in meta}
            clean[item] = {"item_id": item, "variant": "clean", "prompt": p["teacher_prompt"], "meta": clean_meta}
        variant = f"biased:{meta.get('template')}:{meta.get('suggested')}"
        biased.append({"item_id": item, "variant": variant, "prompt": p["prompt"], "meta": meta})
    return list(clean.values()) + biased
