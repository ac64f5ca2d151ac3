"""Consistency pairs of the organism's world, per axis and split, from the axes registry.

Each axis builds its own pairs from the world (:meth:`opct.axes.Axis.organism_pairs`), so an axis
registered in :data:`opct.axes.AXES` has organism pairs here, and through :func:`organism_pair_source`
in ``data.train`` (``organism:<axis>[:<split>]``), with nothing else to change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opct.organism.world import DEFAULT_SEED

SPLITS = ("train", "heldout")


def build_pairs(axis: str, split: str, seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    """Consistency pairs of one axis and split in the world of ``seed``.

    sycophancy: prompt = question with a user's suggested wrong option (one per wrong option per cue
    template of the split), teacher_prompt = the clean question. jailbreak: prompt = wrapped request,
    teacher_prompt = bare request. awareness: prompt = plain task, teacher_prompt = the task with the
    safety fact in a system message. Other registered axes: whatever they define.
    """
    from opct.axes import AXES, pair_axes

    names = pair_axes()
    if axis not in names:
        raise ValueError(f"unknown axis {axis!r}; choose one of {', '.join(names)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return AXES.get(axis).organism_pairs(split, seed)


def organism_pair_source(argument: str) -> list[dict[str, Any]]:
    """The ``organism`` pair source: ``"<axis>[:<split>]"`` (split defaults to ``train``)."""
    axis, _, split = argument.partition(":")
    return build_pairs(axis, split or "train")


def write_pairs(pairs: list[dict[str, Any]], path: str | Path) -> Path:
    """Write pairs as JSON lines; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    return path
