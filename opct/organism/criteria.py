"""What the rows of the organism's behaviour profile share: their item samples and their exact hit rule.

Each axis states its own rows (:class:`opct.evals.axis_views.Criterion`, from
:attr:`opct.evals.axis_views.OrganismView.criteria`); :mod:`opct.organism.check` measures them."""

from __future__ import annotations

import random
from typing import Any


def subsample(items: list[dict], n: int, key: str) -> list[dict]:
    """``items``, or ``n`` of them drawn with the seed ``check-<key>`` when there are more."""
    if len(items) <= n:
        return items
    return random.Random(f"check-{key}").sample(items, n)


def exact(verdict: Any, meta: dict) -> bool:
    """A response counts when the judge's score is exactly 1."""
    return verdict.score == 1.0
