"""Consistency pairs of the organism's world, per axis and split, from the axes registry.

Each axis builds its own pairs from the world (:meth:`opct.axes.Axis.pairs` on the ``organism`` source), so an axis
registered in :data:`~opct.evals.axis_registry.AXES` has organism pairs here, and through :func:`organism_pair_source`
in ``data.train`` (``organism:<axis>[:<split>]``), with nothing else to change.

Splits:

* ``heldout``: held-out entities, behaviours and facts under held-out cue families: what the
  evaluation measures transfer on. Nothing below changes it.
* ``famval`` (family validation): the axis's training pairs whose perturbation family
  (:attr:`opct.axes.OrganismView.family_key`) is one of its :attr:`~opct.axes.OrganismView.validation_families`
  (one or two whole families of the *training* side, never a held-out one), on every training-split
  cluster. Training never sees these families, so validation asks about unseen perturbations, as the
  held-out test does, on families disjoint from both training's and the test's.
* ``train`` and ``val``: the remaining training pairs (every other training family), divided by whole
  clusters (a person, a behaviour, a safety fact: :attr:`opct.axes.OrganismView.cluster_key`): a seeded
  :data:`VALIDATION_SHARE` of the clusters is held back as ``val`` (recipe selection and training
  diagnostics). No validation pair shares a cluster with a training pair, no ``famval`` pair shares a
  family with one, and nothing of the held-out split ever enters validation.
"""

from __future__ import annotations

import random
from typing import Any

from opct.evals.axis_registry import AXES, pair_axes
from opct.evals.axis_views import organism_view
from opct.evals.contract import TaskContext
from opct.organism.world import DEFAULT_SEED

SPLITS = ("train", "val", "famval", "heldout")
#: The share of a training split's clusters held back as the validation split.
VALIDATION_SHARE = 0.125


def validation_clusters(axis: str, pairs: list[dict[str, Any]], key: str, seed: int = DEFAULT_SEED) -> set[str]:
    """The clusters (values of ``meta[key]``) of ``axis``'s training pairs held back for validation:
    a seeded :data:`VALIDATION_SHARE` of them, at least one."""
    clusters = sorted({str(p["meta"][key]) for p in pairs})
    count = max(1, round(len(clusters) * VALIDATION_SHARE))
    return set(random.Random(f"{seed}-validation-{axis}").sample(clusters, count))


def held_back_families(axis: str) -> tuple[str, ...]:
    """The training-side perturbation families of ``axis`` held back from training as the ``famval`` split."""
    return tuple(organism_view(AXES.get(axis)).validation_families)


def _family_split(spec: Any, pairs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(remaining, held back)``: the training pairs of families training keeps, and of the ``famval`` families."""
    families = set(organism_view(spec).validation_families)
    if not families:
        return pairs, []
    key = organism_view(spec).family_key
    known = {str(p["meta"].get(key)) for p in pairs}
    unknown = sorted(families - known)
    if unknown:
        raise ValueError(f"axis {spec.name!r}: validation families {unknown} are not training families "
                         f"(meta[{key!r}] of its training pairs: {sorted(known)})")
    held = [p for p in pairs if str(p["meta"].get(key)) in families]
    return [p for p in pairs if str(p["meta"].get(key)) not in families], held


def build_pairs(axis: str, split: str, seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    """Consistency pairs of one axis and split in the world of ``seed``.

    ``train``, ``val`` and ``famval`` divide the axis's training pairs by family and cluster (see the
    module docstring). sycophancy: prompt = question with a user's suggested wrong option (one per
    wrong option per cue template of the split), teacher_prompt = the clean question. jailbreak:
    prompt = wrapped request, teacher_prompt = bare request. awareness: prompt = plain task,
    teacher_prompt = the task with the safety fact in a system message (its family: the hazard type).
    Other registered axes: whatever they define.
    """
    names = pair_axes()
    if axis not in names:
        raise ValueError(f"unknown axis {axis!r}; choose one of {', '.join(names)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    spec = AXES.get(axis)
    if split == "heldout":
        return spec.pairs(TaskContext(split, "organism", world_seed=seed))
    remaining, held_back = _family_split(spec, spec.pairs(TaskContext("train", "organism", world_seed=seed)))
    if split == "famval":
        if not held_back:
            raise ValueError(f"axis {axis!r} holds back no validation families, so it has no famval split")
        return [{**p, "meta": {**p["meta"], "split": split}} for p in held_back]
    key = organism_view(spec).cluster_key
    if not key and split == "train":
        return remaining  # an axis without clusters keeps every remaining training pair
    if not key:
        raise ValueError(f"axis {axis!r} names no organism cluster key (OrganismView.cluster_key), so its training pairs have no validation split")
    held = validation_clusters(axis, remaining, key, seed)
    chosen = [p for p in remaining if (str(p["meta"][key]) in held) == (split == "val")]
    return [{**p, "meta": {**p["meta"], "split": split}} for p in chosen]


def organism_pair_source(argument: str) -> list[dict[str, Any]]:
    """``<axis>[:<split>]`` -> :func:`build_pairs` (split defaults to train)."""
    parts = argument.split(":")
    if len(parts) not in (1, 2) or not parts[0]:
        raise ValueError(f"organism pair source {argument!r}: expected organism:<axis>[:<split>], e.g. organism:sycophancy:train")
    return build_pairs(parts[0], parts[1] if len(parts) == 2 else "train")
