"""Sycophancy on real multiple-choice data: items, loader, prompts and consistency pairs.

Pairs
    For every item and every wrong option, one biased prompt per chosen cue template (the student's
    ``prompt``) paired with the clean prompt (``teacher_prompt``). Cues come from
    :data:`opct.axes.sycophancy.templates.REAL` unless another list is given.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.axes.base import TRAIN, Messages, Template, check_unique_ids, make_pair, of_split, user
from opct.axes.sycophancy.templates import REAL, render_cue
from opct.datasets.base import DatasetFormatError
from opct.datasets.tabular import Row, iter_rows

NAME = "sycophancy"
LETTERS = string.ascii_uppercase
DEFAULT_INSTRUCTION = (
    "Answer with the letter of the correct option. End your reply with a final line of the form "
    '"Answer: (X)".'
)

@dataclass(frozen=True)
class MCItem:
    """A multiple-choice question: ``choices`` in order A, B, C...; ``answer`` is the gold letter."""

    id: str
    question: str
    choices: tuple[str, ...]
    answer: str
    source: str = ""


def _letter(value: Any, n: int) -> str | None:
    s = str(value).strip().strip("()").upper()
    if s.isdigit() and 0 <= int(s) < n:
        return LETTERS[int(s)]
    return s if len(s) == 1 and s in LETTERS[:n] else None


def _item_from(row: Row, path: Path, source: str, number: int) -> MCItem:
    values = row.values

    def fail(problem: str, field: str) -> DatasetFormatError:
        return DatasetFormatError.at(path, row, problem, field=field)

    if "question" not in values or not str(values["question"]).strip():
        raise fail("missing or empty", "question")
    if "choices" in values:
        choices = values["choices"]
        if not isinstance(choices, list) or len(choices) < 2:
            raise fail("must be a list of at least 2 options", "choices")
    else:
        choices = [values[c] for c in LETTERS if c in values and str(values[c]).strip()]
        if len(choices) < 2:
            raise fail("need 'choices' or columns A, B, ... with at least 2 options", "choices")
    if "answer" not in values:
        raise fail("missing", "answer")
    answer = _letter(values["answer"], len(choices))
    if answer is None:
        raise fail(f"{values['answer']!r} is not a letter or index of the {len(choices)} options", "answer")
    item_id = str(values.get("id") or f"{path.stem}-{number:05d}")
    return MCItem(item_id, str(values["question"]).strip(), tuple(str(c) for c in choices), answer, source)


def load_mc_items(path: str | Path, source: str | None = None) -> list[MCItem]:
    """Multiple-choice items from JSONL (``question``, ``choices`` list or ``A``..``D``, ``answer``
    letter or 0-based index, optional ``id``) or CSV with a header of the same names.

    Raises :class:`~opct.datasets.base.DatasetFormatError` naming the file, line and field of the
    first problem. A row without ``id`` gets ``<stem>-<line>`` (JSONL: its line; CSV: 1 + its row
    number). A missing file raises ``FileNotFoundError``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"multiple-choice data not found at {path}")
    source = source or path.stem
    fmt = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    # Default ids are numbered as before: the JSONL line; the CSV row + 1 (its line unless cells span lines).
    items = [
        _item_from(row, path, source, row.position if fmt == "jsonl" else i + 2)
        for i, row in enumerate(iter_rows(path, fmt))
    ]
    check_unique_ids(path, (it.id for it in items))
    return items


def format_question(item: MCItem, instruction: str = DEFAULT_INSTRUCTION) -> str:
    """The clean question block: question, lettered options, answer-format instruction."""
    options = "\n".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(item.choices))
    return f"{item.question}\n\n{options}" + (f"\n\n{instruction}" if instruction else "")


def clean_prompt(item: MCItem, instruction: str = DEFAULT_INSTRUCTION) -> Messages:
    """The unbiased prompt for ``item``."""
    return user(format_question(item, instruction))


def biased_prompt(item: MCItem, template: Template, letter: str, instruction: str = DEFAULT_INSTRUCTION) -> Messages:
    """``item`` with ``template``'s cue suggesting option ``letter``."""
    option = item.choices[LETTERS.index(letter)]
    return user(render_cue(template.text, format_question(item, instruction), letter, option))


def build_pairs(
    items: Sequence[MCItem],
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
        for i in range(len(item.choices)):
            letter = LETTERS[i]
            if letter == item.answer:
                continue
            chosen = temps if templates_per_option is None else rng.sample(temps, min(templates_per_option, len(temps)))
            for t in chosen:
                meta = {"item_id": item.id, "answer": item.answer, "suggested": letter, "template": t.id,
                        "family": t.family, "split": t.split, "n_choices": len(item.choices), "source": item.source}
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
            clean_meta = {k: meta[k] for k in ("item_id", "answer", "n_choices", "source") if k in meta}
            clean[item] = {"item_id": item, "variant": "clean", "prompt": p["teacher_prompt"], "meta": clean_meta}
        variant = f"biased:{meta.get('template')}:{meta.get('suggested')}"
        biased.append({"item_id": item, "variant": variant, "prompt": p["prompt"], "meta": meta})
    return list(clean.values()) + biased
