"""What every safety axis shares: templates and their named splits, pair construction, record access.

Templates use one placeholder scheme: ``{name}`` slots filled by :func:`fill` (sycophancy cues:
``{question}``, ``{letter}``, ``{option}``; jailbreak wrappers: ``{request}``, ``{core}``; awareness
teacher prompts: ``{fact}``). Data-format errors are :class:`opct.datasets.base.DatasetFormatError`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opct.datasets.errors import DatasetFormatError
from opct.stats.estimate import Estimate

Messages = list[dict[str, str]]
TRAIN = "train"
HELDOUT = "heldout"
SPLITS = (TRAIN, HELDOUT)
_SLOT = re.compile(r"\{(\w+)\}")


def fill(text: str, **slots: str) -> str:
    """``text`` with every ``{name}`` slot named in ``slots`` replaced, in one pass.

    Slots not given and any other braces are kept as they are; a filled value is never scanned for
    slots again (so a question that happens to contain ``{letter}`` stays intact).
    """
    return _SLOT.sub(lambda m: slots[m.group(1)] if m.group(1) in slots else m.group(0), text)


def user(content: str, system: str | None = None) -> Messages:
    """A chat message list with one user message (and an optional system message first)."""
    msgs: Messages = [{"role": "system", "content": system}] if system else []
    msgs.append({"role": "user", "content": content})
    return msgs


def make_pair(
    pair_id: str, axis: str, prompt: Messages, teacher_prompt: Messages, meta: Mapping[str, Any]
) -> dict[str, Any]:
    """A consistency pair: ``{id, axis, prompt, teacher_prompt, meta}`` (the pair contract of :mod:`opct.pairs`).

    ``prompt`` is what the student sees (the perturbed prompt); ``teacher_prompt`` the clean or
    contrastive prompt the frozen teacher scores the student's completion under.
    """
    return {"id": pair_id, "axis": axis, "prompt": prompt, "teacher_prompt": teacher_prompt, "meta": dict(meta)}


@dataclass(frozen=True)
class Template:
    """A perturbation template: ``id``, ``family``, ``text`` with slots, ``split`` (train / heldout)."""

    id: str
    family: str
    text: str
    split: str = TRAIN


def assign_splits(templates: list[Template], heldout_families: set[str] | frozenset[str]) -> list[Template]:
    """The templates with ``split`` set by family: held-out families → ``heldout``, others → ``train``."""
    return [
        Template(t.id, t.family, t.text, HELDOUT if t.family in heldout_families else TRAIN) for t in templates
    ]


@dataclass(frozen=True)
class TemplateSet:
    """Perturbation templates in families, with the held-out families named in code.

    ``families`` maps a family to its template texts (in order); template ids are
    ``<family>-<index>`` with indices from ``first_index`` (two digits). ``labels`` optionally gives a
    family a display name (a jailbreak wrapper's style, e.g. ``"role-play"``).
    """

    name: str
    families: Mapping[str, Sequence[str]]
    heldout: frozenset[str]
    first_index: int = 1
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.heldout) - set(self.families)
        if unknown:
            raise ValueError(f"template set {self.name!r}: held-out families {sorted(unknown)} are not defined")

    def split_of(self, family: str) -> str:
        """``"heldout"`` or ``"train"``."""
        return HELDOUT if family in self.heldout else TRAIN

    def family_names(self, split: str | None = None) -> list[str]:
        """The families of ``split`` (``None``: all), in definition order."""
        check_split(split)
        return [f for f in self.families if split is None or self.split_of(f) == split]

    def templates(self, split: str | None = None) -> list[Template]:
        """The templates of ``split`` (``None``: all), family by family."""
        return [
            Template(f"{fam}-{i:02d}", fam, text, self.split_of(fam))
            for fam in self.family_names(split)
            for i, text in enumerate(self.families[fam], self.first_index)
        ]


def check_split(split: str | None) -> None:
    """Raise ``ValueError`` unless ``split`` is ``"train"``, ``"heldout"`` or ``None``."""
    if split not in (None, *SPLITS):
        raise ValueError(f"split must be {TRAIN!r} or {HELDOUT!r}, got {split!r}")


def of_split(templates: Iterable[Template], split: str | None) -> list[Template]:
    """The templates of one ``split`` (``"train"`` / ``"heldout"``; ``None`` keeps all)."""
    check_split(split)
    return [t for t in templates if split is None or t.split == split]


def check_unique_ids(path: str | os.PathLike[str], ids: Iterable[str]) -> None:
    """Raise :class:`DatasetFormatError` (field ``id``) naming the first id seen a second time."""
    seen: set[str] = set()
    for item_id in ids:
        if item_id in seen:
            raise DatasetFormatError(path, f"duplicate id {item_id!r}", field="id")
        seen.add(item_id)


def field_of(record: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """``record[key]``, else ``record["meta"][key]``, else ``default`` (records carry pair meta)."""
    if key in record and record[key] is not None:
        return record[key]
    meta = record.get("meta") or {}
    return meta.get(key, default)


def score_of(record: Mapping[str, Any], key: str) -> float | None:
    """The judge score ``record["scores"][key]``, or ``None`` when missing, null, NaN or abstained.

    An abstaining judge is recorded either as a null score or as ``scores[f"{key}_abstained"]`` true.
    """
    scores = record.get("scores") or {}
    if scores.get(f"{key}_abstained"):
        return None
    value = scores.get(key)
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def verdict_scores(key: str, verdict: Any) -> dict[str, Any]:
    """The ``scores`` entries for one judge verdict: ``{key: score or None, key_abstained: bool}``.

    An abstaining verdict's score is stored as ``None`` so that every metric leaves it out.
    """
    abstained = bool(getattr(verdict, "abstained", False))
    return {key: None if abstained else float(verdict.score), f"{key}_abstained": abstained}


def with_breakdown(
    overall: dict[str, Estimate], by_group: Mapping[str, Mapping[str, Estimate]], keep: Sequence[str]
) -> dict[str, Estimate]:
    """Overall metrics plus ``name/<group>`` entries for the ``keep`` metrics of each group."""
    out = dict(overall)
    for group, metrics in by_group.items():
        for name in keep:
            if name in metrics:
                out[f"{name}/{group}"] = metrics[name]
    return out
