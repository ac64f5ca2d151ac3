"""Whether a run's own samples degenerated while it trained, read from its ``metrics.jsonl``.

An on-policy run (OPCT) logs, each step, its rollouts' mean entropy (nats per token), their teacher-KL
and the share cut at the token limit. A run whose sampler collapses (entropy and teacher-KL rising by
an order of magnitude, most rollouts running to the limit) can still answer well when decoded greedily,
and every eval and the attack decode greedily, so its results do not show the collapse. The study of
issue 41 met exactly this (docs/mechanism.md, "The study's results": its L4 OPCT runs' entropy went
from 0.4 to 5 nats per token after step ~100 while their greedy answers kept refusing).

:func:`rollout_collapse` compares the mean of the first and of the last :data:`WINDOW` steps (half the
steps when the run is shorter) and calls the rollouts degenerated when, at the end, at least
:data:`CUT_SHARE` of them are cut at the limit, or the entropy is at least :data:`ENTROPY_RATIO` times
its start and :data:`ENTROPY_RISE` nats per token above it. These thresholds were tuned on the runs of
that same study (they separate its four collapsed OPCT runs from the other 56), not validated on others.
It only describes the run; nothing it finds changes a number. Only steps that scored the run's own rollouts with the teacher (``kl_to_teacher``
beside ``entropy``) count: BCT trains on fixed targets, and its logged entropy and cut-off share are its
targets', so it is never flagged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Steps averaged at the start and at the end of a run.
WINDOW = 10
#: A share of the last steps' rollouts cut at the token limit that alone marks a collapse.
CUT_SHARE = 0.5
#: How many times its start the last steps' entropy must be, and by how many nats per token above it.
ENTROPY_RATIO = 3.0
ENTROPY_RISE = 1.0


@dataclass(frozen=True)
class RolloutCollapse:
    """How a run's rollouts changed from its first steps to its last (means over ``window`` steps each)."""

    window: int
    entropy: tuple[float, float]
    teacher_kl: tuple[float, float] | None
    cut_share: float
    #: The first step whose entropy reached twice the start's mean.
    from_step: int | None

    def sentence(self) -> str:
        """The warning the report shows for the run."""
        kl = (f", their teacher-KL {self.teacher_kl[0]:.3f} → {self.teacher_kl[1]:.3f}" if self.teacher_kl else "")
        since = f" (entropy past twice its start from step {self.from_step})" if self.from_step is not None else ""
        return (f"its own samples degenerated while it trained: rollout entropy {self.entropy[0]:.2f} → "
                f"{self.entropy[1]:.2f} nats per token{kl}, {self.cut_share:.0%} of the rollouts cut at the token "
                f"limit (means of the first and the last {self.window} steps){since}. Evals and attacks decode "
                "greedily and may not show it: read its training curves before trusting its numbers.")


def _mean(records: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [float(r[key]) for r in records if isinstance(r.get(key), int | float) and math.isfinite(float(r[key]))]
    return sum(values) / len(values) if values else None


def rollout_collapse(records: Sequence[Mapping[str, Any]]) -> RolloutCollapse | None:
    """The collapse of a run's rollouts from its per-step ``metrics.jsonl`` records, or None when they did not
    degenerate (or the run scored no rollouts of its own, or fewer than 2 steps)."""
    steps = [r for r in records if isinstance(r.get("entropy"), int | float) and "kl_to_teacher" in r and "step" in r]
    if len(steps) < 2:
        return None
    window = min(WINDOW, len(steps) // 2)
    first, last = steps[:window], steps[-window:]
    h0, h1 = _mean(first, "entropy"), _mean(last, "entropy")
    if h0 is None or h1 is None:  # entropies logged but none finite
        return None
    cut = _mean(last, "truncation_rate") or 0.0
    rose = h1 >= ENTROPY_RATIO * h0 and h1 - h0 >= ENTROPY_RISE
    if not rose and cut < CUT_SHARE:
        return None
    k0, k1 = _mean(first, "kl_to_teacher"), _mean(last, "kl_to_teacher")
    from_step = next((int(r["step"]) for r in steps if float(r["entropy"]) >= 2 * h0), None) if h0 > 0 else None
    return RolloutCollapse(window, (h0, h1), (k0, k1) if k0 is not None and k1 is not None else None, cut, from_step)
