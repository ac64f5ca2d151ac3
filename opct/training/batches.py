"""What each optimizer step trains on: the training pairs (read and checked before any model loads),
the number of steps, each step's global batch, and the seeding that makes a resumed step replay exactly."""

from __future__ import annotations

import math
import random

import numpy as np
import torch

from opct.config import RunConfig
from opct.pairs import PAIR_SOURCES, ConsistencyPair, is_heldout_split, is_validation_split, load_pair_source

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
    ids = [p.id for p in pairs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"pair id {dup!r} appears in more than one training file; ids must be unique")
    return pairs


def _at(pair: ConsistencyPair) -> str:
    """`` at file:line`` where the pair was read, or nothing."""
    file, line = pair.where
    return f" at {file}:{line}" if file else ""


def total_steps(cfg: RunConfig, n_pairs: int) -> int:
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
