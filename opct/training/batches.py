"""What each optimizer step trains on: the training pairs (read and checked before any model loads),
the number of steps, each step's global batch, and the seeding that makes a resumed step replay exactly."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import torch

from opct.config import RunConfig
from opct.errors import OpctWarning
from opct.pairs import (
    PAIR_SOURCES,
    ConsistencyPair,
    is_heldout_split,
    is_train_split,
    is_validation_split,
    load_pair_source,
)

_ALLOW_HELDOUT = "pass --allow-heldout-training (data.allow_heldout_training: true) if this is really what you want"


def refuse_heldout_sources(cfg: RunConfig) -> None:
    """Refuse, before anything is read, a training source that names a held-out or validation split in any
    spelling: ``organism:sycophancy:held-out``, ``organism:attacker:HeldOut``, ``data.split: heldout``.

    A pair's own ``meta.split`` is checked after reading (:func:`load_training_pairs`); this catches the
    sources whose pairs carry no split (the attacker's instructions) and the misspellings a source
    might read as another name."""
    named = [("data.split", cfg.data.split)] if cfg.data.split else []
    for source in cfg.data.train:
        prefix, sep, argument = source.partition(":")
        if sep and prefix in PAIR_SOURCES:
            named += [(f"data.train entry {source!r}", part) for part in argument.split(":")[1:]]
    for where, split in named:
        if is_heldout_split(split) and not cfg.data.allow_heldout_training:
            raise ValueError(
                f"{where} gives held-out pairs (split {split!r}): held-out data is what evaluation "
                f"measures transfer on, so training on it voids that measurement. Train on the train split, or "
                f"{_ALLOW_HELDOUT}."
            )
        if is_validation_split(split):
            raise ValueError(
                f"{where} gives validation pairs (split {split!r}): validation pairs choose the "
                "recipe and are never trained on. Put them in data.validation, not data.train."
            )


def load_training_pairs(cfg: RunConfig) -> list[ConsistencyPair]:
    """Read (and fully validate) every training pair source before any model is loaded.

    Each ``data.train`` entry is a file, a dataset folder, or ``<source>:<argument>`` for a
    registered pair source (:data:`opct.pairs.PAIR_SOURCES`, e.g. ``organism:sycophancy:train``).
    Held-out and validation pairs are refused, whatever the spelling of their split
    (:func:`refuse_heldout_sources`, then each pair's ``meta.split``).
    """
    if not cfg.data.train:
        raise ValueError("no training data: set data.train to one or more pair files")
    refuse_heldout_sources(cfg)
    pairs: list[ConsistencyPair] = []
    for source in cfg.data.train:
        pairs.extend(load_pair_source(source, columns=cfg.data.columns or None, split=cfg.data.split))
    if cfg.data.axes:
        pairs = [p for p in pairs if p.axis in cfg.data.axes]
        if not pairs:
            raise ValueError(f"no pairs left after keeping axes {cfg.data.axes}")
    heldout = [p for p in pairs if is_heldout_split(str(p.meta.get("split", "")))]
    if heldout and not cfg.data.allow_heldout_training:
        raise ValueError(
            f"{len(heldout)} of {len(pairs)} training pairs are held-out pairs (meta.split: "
            f"{heldout[0].meta['split']}; first: {heldout[0].id!r}{_at(heldout[0])}): held-out perturbations are what "
            f"evaluation measures transfer on, so training on them voids that measurement. Train on the train split, "
            f"or {_ALLOW_HELDOUT}."
        )
    validation = [p for p in pairs if is_validation_split(str(p.meta.get("split", "")))]
    if validation:
        raise ValueError(
            f"{len(validation)} of {len(pairs)} training pairs are validation pairs (meta.split: "
            f"{validation[0].meta['split']}; first: {validation[0].id!r}{_at(validation[0])}): validation pairs choose "
            "the recipe and must never be trained on. "
            "Put them in data.validation, not data.train."
        )
    unknown = [p for p in pairs if not _known_split(str(p.meta.get("split", "")))]
    if unknown:
        raise ValueError(
            f"{len(unknown)} of {len(pairs)} training pairs have an unknown split (meta.split: "
            f"{unknown[0].meta['split']!r}; first: {unknown[0].id!r}{_at(unknown[0])}): a training pair's split is "
            "train (or absent); held-out and validation pairs are never trained on. Fix the split name."
        )
    void = [p for p in pairs if p.prompt == p.teacher_prompt]
    if void:
        warnings.warn(
            f"{len(void)} of {len(pairs)} training pairs have a prompt equal to their teacher prompt (first: "
            f"{void[0].id!r}{_at(void[0])}): they carry no perturbation, so they teach no consistency", OpctWarning,
            stacklevel=2)
    ids = [p.id for p in pairs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"pair id {dup!r} appears in more than one training file; ids must be unique")
    return pairs


def _known_split(name: str) -> bool:
    """Whether a pair's ``meta.split`` names a split opct knows (train, held-out, validation, or none)."""
    return not name or is_train_split(name) or is_heldout_split(name) or is_validation_split(name)


def _at(pair: ConsistencyPair) -> str:
    """`` at file:line`` where the pair was read, or nothing."""
    file, line = pair.where
    return f" at {file}:{line}" if file else ""


def length_notice(cfg: RunConfig, n_pairs: int) -> str | None:
    """The rule between ``train.max_steps`` and ``train.epochs``, said when both are given: ``max_steps``,
    when set, is the run's length and ``epochs`` is ignored (a value other than its default 1 is named)."""
    if cfg.train.max_steps is None or cfg.train.epochs == type(cfg.train).model_fields["epochs"].default:
        return None
    epochs = cfg.train.max_steps * cfg.train.pairs_per_step / max(n_pairs, 1)
    return (f"train.max_steps={cfg.train.max_steps} sets the run's length ({epochs:.3g} epochs of {n_pairs} pairs); "
            f"train.epochs={cfg.train.epochs:g} is ignored. Set one of them.")


def total_steps(cfg: RunConfig, n_pairs: int) -> int:
    """Optimizer steps of a run: ``train.max_steps`` when set (it wins over ``epochs``), else the epochs'."""
    if cfg.train.max_steps is not None:
        return cfg.train.max_steps
    return max(1, math.ceil(cfg.train.epochs * n_pairs / cfg.train.pairs_per_step))


def step_indices(step: int, n_pairs: int, batch_size: int, seed: int, shuffle: bool) -> list[int]:
    """Pair indices of a step's global batch: epochs are consecutive seeded permutations."""
    out = []
    for pos in range(step * batch_size, (step + 1) * batch_size):
        epoch, offset = divmod(pos, n_pairs)
        if shuffle:
            order = torch.randperm(n_pairs, generator=torch.Generator().manual_seed(seed * 7919 + epoch))
            out.append(int(order[offset]))
        else:
            out.append(offset)
    return out


def seed_step(seed: int, step: int, rank: int) -> None:
    """Seed every global generator from (seed, step, rank), so a resumed step replays exactly."""
    s = (seed * 1_000_003 + step * 10_007 + rank) % (2**31)
    random.seed(s)
    np.random.seed(s)
    torch.manual_seed(s)
