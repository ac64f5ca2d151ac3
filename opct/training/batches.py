"""What each optimizer step trains on: the training pairs (read and checked before any model loads),
the number of steps, each step's global batch, and the seeding that makes a resumed step replay exactly."""

from __future__ import annotations

import math
import random

import numpy as np
import torch

from opct.config import RunConfig
from opct.pairs import ConsistencyPair, load_pair_source


def load_training_pairs(cfg: RunConfig) -> list[ConsistencyPair]:
    """Read (and fully validate) every training pair source before any model is loaded.

    Each ``data.train`` entry is a file, a dataset folder, or ``<source>:<argument>`` for a
    registered pair source (:data:`opct.pairs.PAIR_SOURCES`, e.g. ``organism:sycophancy:train``).
    """
    if not cfg.data.train:
        raise ValueError("no training data: set data.train to one or more pair files")
    pairs: list[ConsistencyPair] = []
    for source in cfg.data.train:
        pairs.extend(load_pair_source(source, columns=cfg.data.columns or None, split=cfg.data.split))
    if cfg.data.axes:
        pairs = [p for p in pairs if p.axis in cfg.data.axes]
        if not pairs:
            raise ValueError(f"no pairs left after keeping axes {cfg.data.axes}")
    heldout = [p for p in pairs if str(p.meta.get("split", "")) == "heldout"]
    if heldout and not cfg.data.allow_heldout_training:
        raise ValueError(
            f"{len(heldout)} of {len(pairs)} training pairs are held-out pairs (meta.split: heldout; first: "
            f"{heldout[0].id!r}): held-out perturbations are what evaluation measures transfer on, so training on "
            "them voids that measurement. Train on the train split, or pass --allow-heldout-training "
            "(data.allow_heldout_training: true) if this is really what you want."
        )
    validation = [p for p in pairs if str(p.meta.get("split", "")) == "val"]
    if validation:
        raise ValueError(
            f"{len(validation)} of {len(pairs)} training pairs are validation pairs (meta.split: val; first: "
            f"{validation[0].id!r}): validation pairs choose the recipe and must never be trained on. "
            "Put them in data.validation, not data.train."
        )
    ids = [p.id for p in pairs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"pair id {dup!r} appears in more than one training file; ids must be unique")
    return pairs


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
