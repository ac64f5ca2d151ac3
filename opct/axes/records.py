"""What every safety axis shares: pair construction and record access (the perturbation templates and their
named splits are :mod:`opct.evals.template_set`). Data-format errors are :class:`opct.datasets.errors.DatasetFormatError`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opct.datasets.errors import DatasetFormatError
from opct.stats.estimate import Estimate

Messages = list[dict[str, str]]


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
