"""Counts of pairs per axis and split, and their rendered prompt lengths."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opct.pairs.contract import ConsistencyPair


@dataclass
class PairSummary:
    """Counts per axis and split, and optional prompt-length percentiles in tokens."""

    n: int
    by_axis_split: dict[tuple[str, str], int]
    token_percentiles: dict[str, dict[int, int]] | None = None
    #: ``(pair id, side, tokens)`` of every rendered prompt longer than the context given.
    too_long: list[tuple[str, str, int]] = field(default_factory=list)


def summarize_pairs(pairs: list[ConsistencyPair], tokenizer: Any | None = None, context: int | None = None) -> PairSummary:
    """Summarise pairs; with a tokenizer, also the 50/90/99/100th percentile rendered prompt lengths,
    and every prompt that leaves no room in a ``context`` of that many tokens."""
    counts: dict[tuple[str, str], int] = {}
    for p in pairs:
        key = (p.axis or "-", str(p.meta.get("split", "-")))
        counts[key] = counts.get(key, 0) + 1
    percentiles = None
    if tokenizer is not None:
        # deferred: loads torch and transformers only when called
        from opct.models import render_prompt

        percentiles = {}
        too_long = []
        for side in ("prompt", "teacher_prompt"):
            by_pair = [(p.id, len(render_prompt(tokenizer, getattr(p, side)))) for p in pairs]
            too_long += [(pid, side, n) for pid, n in by_pair if context is not None and n >= context]
            lengths = sorted(n for _, n in by_pair)
            percentiles[side] = {q: lengths[min(len(lengths) - 1, (q * len(lengths)) // 100)] for q in (50, 90, 99, 100)}
        return PairSummary(len(pairs), dict(sorted(counts.items())), percentiles, too_long)
    return PairSummary(n=len(pairs), by_axis_split=dict(sorted(counts.items())), token_percentiles=percentiles)
