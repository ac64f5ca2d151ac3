"""The pre-registered dose-response analysis of issue 41 (docs/mechanism.md, "Analysis" and "Reading"), over a
study's levels; the dose itself is the library's (:mod:`opct.report.dose_response`).

Pure functions over what the study report already computes; nothing here trains, loads or samples.

* **The dose** (:func:`opct.report.dose_response.primary_dose`): of a level, the mean over families of the mean over the three
  axes (sycophancy, jailbreak, awareness) of ``own_seq_logprob − target_seq_logprob`` from each
  family's off-policy profile (:mod:`opct.diagnostics.offpolicy`), in nats.
* **Per level** ``D(ℓ, m)``: the pooled OPCT − BCT of a metric over the level's families and seeds,
  :func:`opct.stats.paired.pooled_paired_difference` as the study report pools it
  (:func:`opct.report.pooled.pooled_rows`), with the level's generator seeded ``DEFAULT_SEED + ℓ``
  (ℓ: the level's index in the study's order). Its interval gives the level's weight and its
  resamples (:attr:`~opct.stats.paired.PooledDifference.draws`) the slope's bootstrap.
* **Trend** (:func:`trend`): the weighted least-squares slope ``β`` of ``D`` on the dose, with
  ``w = 1/s²``, ``s = (hi − lo)/(2·1.96)``; its bootstrap recomputes ``β`` on every joint resample of
  the levels' ``D`` (levels resampled independently), weights fixed at their point values; the 95%
  interval and the 98.33% (Bonferroni over the three safety metrics) interval are percentiles of the
  same resamples.
* **Reading** (:func:`read_hypothesis`): a metric's trend holds / is reversed / is not resolved as its
  interval excludes 0 on the paper's side / the other side / neither (:func:`opct.report.pooled.verdict`);
  the hypothesis is supported when a safety metric holds at the Bonferroni level and no metric is
  reversed at 95%, and is not read when the dose does not move (:func:`dose_moves`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from opct.report.dose_response import Z_95, Dose
from opct.report.metric import json_number
from opct.report.pooled import HOLDS, NO_WORSE, NOT_MEASURED, NOT_RESOLVED, REVERSED, verdict
from opct.stats.estimate import percentile_ci
from opct.stats.paired import PooledDifference

#: The three safety metrics of the hypothesis; the Bonferroni level is over these.
SAFETY_METRICS = ("dsr_adaptive", "sycophancy", "awareness")
ALPHA = 0.05
#: The Bonferroni alpha over the three safety metrics (a 98.33% interval).
BONFERRONI_ALPHA = ALPHA / len(SAFETY_METRICS)

#: The prefix of the capability columns, each a metric of the hypothesis (tested one by one).
CAPABILITY_PREFIX = "cap:"

SUPPORTED = "supported"
AGAINST = "against"
DOSE_STILL = "the dose does not move"
NOT_READ = "not read"


def dose_moves(first: Dose, last: Dose) -> bool:
    """Whether the knob moved the dose: the last level's dose lies outside the first level's 95% interval."""
    return not first.ci_low <= last.value <= first.ci_high


def level_weight(difference: PooledDifference) -> float:
    """``w = 1/s²``, ``s = (hi − lo)/(2·1.96)`` from a level's 95% interval (``nan`` when it has none or no width)."""
    est = difference.estimate
    s = (est.ci_high - est.ci_low) / (2 * Z_95)
    return 1.0 / s**2 if s > 0 and math.isfinite(s) else math.nan


def wls_slope(x: Sequence[float], d: np.ndarray, w: Sequence[float]) -> np.ndarray | float:
    """The weighted least-squares slope of ``d`` on ``x`` with weights ``w``:
    ``Σ w(x − x̄)(d − d̄) / Σ w(x − x̄)²``, ``x̄``, ``d̄`` the weighted means. ``d`` holds one value per level,
    or one row per level and one column per resample (then one slope per column). ``nan`` when every
    ``x`` is the same."""
    xs, ws = np.asarray(x, dtype=float), np.asarray(w, dtype=float)
    ds = np.asarray(d, dtype=float)
    x_bar = float((ws * xs).sum() / ws.sum())
    dx = xs - x_bar
    denominator = float((ws * dx**2).sum())
    weighted = (ws * dx)[:, None] if ds.ndim == 2 else ws * dx
    d_bar = (ws[:, None] * ds).sum(axis=0) / ws.sum() if ds.ndim == 2 else float((ws * ds).sum() / ws.sum())
    numerator = (weighted * (ds - d_bar)).sum(axis=0)
    if denominator <= 0.0:
        return np.full(ds.shape[1], math.nan) if ds.ndim == 2 else math.nan
    return numerator / denominator if ds.ndim == 2 else float(numerator / denominator)


@dataclass(frozen=True)
class LevelPoint:
    """One level of one metric: its dose and its pooled OPCT − BCT (with the bootstrap resamples)."""

    level: str
    dose: float
    difference: PooledDifference


@dataclass(frozen=True)
class Trend:
    """The trend test of one metric: ``β``, its 95% and Bonferroni intervals, and their readings."""

    direction: str | None
    beta: float
    ci: tuple[float, float]
    ci_bonferroni: tuple[float, float]
    #: Joint resamples in which every level had a value (a level's resample without any shared unit drops it).
    resamples: int
    reading: str
    reading_bonferroni: str
    weights: tuple[float, ...]
    #: OPCT on the paper's side at every level (each level's 95% interval), whatever the trend: a constant
    #: advantage, reported as such and never as support.
    ahead_everywhere: bool
    #: Levels whose resamples have no spread (every unit agreed, so their own interval was widened by the
    #: Wilson floor): the slope's resamples do not carry that floor, so its interval understates the uncertainty.
    collapsed_levels: int = 0


def trend(points: Sequence[LevelPoint], direction: str | None) -> Trend:
    """The weighted slope of ``D`` on the dose over ``points`` (one per level) with its bootstrap intervals,
    read against the paper's ``direction`` (``"higher"``/``"lower"``; ``None``: no claim; capability's
    ``"no worse"`` is read as ``"higher"``, as pre-registered, and kept as the trend's stated side).

    Every level's :attr:`~opct.stats.paired.PooledDifference.draws` must come from its own generator (the
    levels are resampled independently) and have the same number of resamples; the b-th slope uses the
    b-th resample of every level with the weights fixed at their point values. Fewer than two levels with a
    measured difference and a positive weight, or a single dose, give ``nan`` and :data:`NOT_MEASURED`.
    """
    stated = direction
    # A slope has no non-inferiority margin: the pre-registered reading takes capability's side as "higher".
    direction = "higher" if direction == NO_WORSE else direction
    measured = [p for p in points if math.isfinite(p.difference.estimate.value) and math.isfinite(level_weight(p.difference))]
    weights = tuple(level_weight(p.difference) for p in measured)
    everywhere = bool(points) and len(measured) == len(points) and all(
        verdict(direction, p.difference.estimate.ci_low, p.difference.estimate.ci_high) == HOLDS for p in points)
    nan2 = (math.nan, math.nan)
    if len(measured) < 2 or len({p.dose for p in measured}) < 2:
        return Trend(stated, math.nan, nan2, nan2, 0, NOT_MEASURED, NOT_MEASURED, weights, everywhere, 0)
    doses = [p.dose for p in measured]
    beta = float(wls_slope(doses, np.array([p.difference.estimate.value for p in measured]), weights))
    sizes = {len(p.difference.draws) for p in measured}
    if len(sizes) != 1:
        raise ValueError(f"the levels' differences have different numbers of resamples: {sorted(sizes)}")
    draws = np.vstack([p.difference.draws for p in measured])
    draws = draws[:, np.isfinite(draws).all(axis=0)]
    collapsed = int(sum(float(np.ptp(row)) == 0.0 for row in draws)) if draws.shape[1] else 0
    betas = np.asarray(wls_slope(doses, draws, weights), dtype=float)
    ci = percentile_ci(betas, ALPHA)
    ci_b = percentile_ci(betas, BONFERRONI_ALPHA)
    ci, ci_b = (min(ci[0], beta), max(ci[1], beta)), (min(ci_b[0], beta), max(ci_b[1], beta))
    return Trend(stated, beta, ci, ci_b, int(draws.shape[1]), verdict(direction, *ci), verdict(direction, *ci_b),
                 weights, everywhere, collapsed)


def in_hypothesis(key: str) -> bool:
    """Whether a results column is one of the hypothesis's metrics: a safety metric or a capability column."""
    return key in SAFETY_METRICS or key.startswith(CAPABILITY_PREFIX)


@dataclass(frozen=True)
class HypothesisReading:
    """The study's answer: :data:`SUPPORTED`, :data:`AGAINST`, :data:`DOSE_STILL` or :data:`NOT_READ`, and why."""

    outcome: str
    reasons: list[str]


def read_hypothesis(trends: Mapping[str, Trend], first: Dose | None, last: Dose | None) -> HypothesisReading:
    """Read the hypothesis as docs/mechanism.md writes it, from each metric's trend (keyed by results column;
    the safety metrics are :data:`SAFETY_METRICS`; they and every capability column count for reversal,
    any other column is reported beside the test and left out of it) and the first and last levels' doses.

    * the dose does not move (:func:`dose_moves` false): :data:`DOSE_STILL`, the trend is not read;
    * a safety metric not measured and nothing yet decides against: :data:`NOT_READ`;
    * :data:`SUPPORTED` when at least one safety metric's trend holds at the Bonferroni level and no
      metric with a paper side is reversed at 95%; :data:`AGAINST` otherwise (each reason listed).
    """
    if first is None or last is None:
        return HypothesisReading(NOT_READ, ["a level's dose is not measured"])
    if not dose_moves(first, last):
        return HypothesisReading(DOSE_STILL, [
            f"the last level's dose {last.value:.3f} lies within the first level's 95% interval "
            f"[{first.ci_low:.3f}, {first.ci_high:.3f}]: the knob did not change what the hypothesis is about"])
    reversed_ = [k for k, t in trends.items() if in_hypothesis(k) and t.direction is not None and t.reading == REVERSED]
    holding = [k for k in SAFETY_METRICS if k in trends and trends[k].reading_bonferroni == HOLDS]
    unmeasured = [k for k in SAFETY_METRICS if k not in trends or trends[k].reading_bonferroni == NOT_MEASURED]
    reasons = [f"{k}: the trend is reversed at 95% (BCT's advantage grows with the dose)" for k in reversed_]
    if holding and not reversed_:
        return HypothesisReading(SUPPORTED, [f"{k}: the trend holds at the Bonferroni level (98.33%)" for k in holding])
    if unmeasured and not reversed_:
        return HypothesisReading(NOT_READ, [f"{k}: not measured" for k in unmeasured])
    if not holding:
        reasons.append("no safety metric's trend holds at the Bonferroni level (98.33%)")
        flat = [k for k in SAFETY_METRICS if k in trends and trends[k].ahead_everywhere
                and trends[k].reading_bonferroni == NOT_RESOLVED]
        reasons += [f"{k}: OPCT ahead at every level with no resolved trend (a constant advantage, not a "
                    "dose-response)" for k in flat]
    return HypothesisReading(AGAINST, reasons)


def trend_record(t: Trend) -> dict[str, Any]:
    """A trend as ``report.json`` writes it (strict JSON numbers)."""
    return {"paper_side": t.direction, "beta": json_number(t.beta), "ci": [json_number(v) for v in t.ci],
            "ci_bonferroni": [json_number(v) for v in t.ci_bonferroni], "resamples": t.resamples,
            "weights": list(t.weights), "reading": t.reading, "reading_bonferroni": t.reading_bonferroni,
            "ahead_everywhere": t.ahead_everywhere, "collapsed_levels": t.collapsed_levels}


def study_hypothesis(trends: Mapping[str, Trend], doses: Sequence[Dose | None]) -> HypothesisReading:
    """:func:`read_hypothesis` over the metrics with a paper side, between the first and the last level's doses."""
    return read_hypothesis({k: t for k, t in trends.items() if t.direction is not None},
                           doses[0] if doses else None, doses[-1] if doses else None)
