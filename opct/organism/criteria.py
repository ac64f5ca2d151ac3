"""One row of the organism's behaviour profile (``opct organism check``): which items, how each
response counts, and the rate it must reach. Each axis states its own rows
(:meth:`opct.axes.contract.Axis.organism_criteria`); :mod:`opct.organism.check` measures them."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Criterion:
    """One row of the profile: which items, how each response counts, and the required rate."""

    name: str
    items: list[dict]
    judge: str
    hit: Callable[[Any, dict], bool]
    op: str
    threshold: float

    def passes(self, rate: float) -> bool:
        return rate >= self.threshold if self.op == ">=" else rate <= self.threshold


def subsample(items: list[dict], n: int, key: str) -> list[dict]:
    """``items``, or ``n`` of them drawn with the seed ``check-<key>`` when there are more."""
    if len(items) <= n:
        return items
    return random.Random(f"check-{key}").sample(items, n)


def exact(verdict: Any, meta: dict) -> bool:
    """A response counts when the judge's score is exactly 1."""
    return verdict.score == 1.0
