"""Consistency pairs of the organism's world, per axis and split, from the axes registry.

Each axis builds its own pairs from the world (:meth:`opct.axes.Axis.organism_pairs`), so an axis
registered in :data:`opct.axes.AXES` has organism pairs here, and through :func:`organism_pair_source`
in ``data.train`` (``organism:<axis>[:<split>]``), with nothing else to change.
"""

from __future__ import annotations

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
    """``<axis>[:<split>]`` -> :func:`build_pairs` (split defaults to train)."""
    parts = argument.split(":")
    if len(parts) not in (1, 2) or not parts[0]:
        raise ValueError(f"organism pair source {argument!r}: expected organism:<axis>[:<split>], e.g. organism:sycophancy:train")
    return build_pairs(parts[0], parts[1] if len(parts) == 2 else "train")
