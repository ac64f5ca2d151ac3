"""Rates, intervals and paired statistics shared by every evaluation axis.

Every number an evaluation reports is an :class:`Estimate`: a value, a 95% interval, the ``n``
(the denominator) it was computed from and, for clustered data, the number of independent
``clusters`` and the effective sample size ``n_eff`` the interval was computed at.

Interval methods (the ``method`` field):

* ``"wilson"``: Wilson score interval for independent yes/no outcomes (:func:`rate`). Only honest
  when the rows really are independent; axis metrics use the clustered methods instead.
* ``"cluster-wilson"`` / ``"two-level-wilson"``: a Wilson interval at an *effective* sample size
  derived from a cluster-robust or bootstrap variance (:mod:`opct.stats.intervals`), for rows that share
  a unit (a question, a behaviour, a template, a safety fact). The effective n is k (the number of
  units) at a rate of 0 or 1 and rises continuously from k near the ends, so that the interval is
  monotone in the number of successes; the cluster-robust one also carries a k − 1 degrees-of-freedom
  correction and is never below Kish's effective number of clusters (details in that module).
* ``"bootstrap"``: a seeded percentile bootstrap that resamples a grouping unit, never single rows
  that share one (:func:`bootstrap`, :func:`clustered_mean`). It can have zero width when every
  unit agrees; proportions should use the Wilson-based methods, which never collapse.
* ``"paired-cluster-bootstrap"``: paired differences (:func:`paired_difference`,
  :func:`opct.stats.paired.paired_cluster_difference`), widened when the bootstrap collapses to the
  uncertainty of "nothing seen on k units" (:func:`no_difference_halfwidth`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

Z_95 = 1.959963984540054
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 47


@dataclass(frozen=True)
class Estimate:
    """A reported number: ``value`` with interval ``[ci_low, ci_high]`` computed from ``n`` units.

    ``value`` is ``nan`` when ``n`` is 0 (nothing to estimate); the interval then is ``nan`` too.
    ``method`` names how the interval was computed (see the module docstring). ``clusters`` is the
    number of independent units the interval is over (``None``: rows taken as independent) and
    ``n_eff`` the effective sample size the interval was computed at (``None``: not applicable).
    """

    value: float
    ci_low: float
    ci_high: float
    n: int
    method: str = "wilson"
    clusters: int | None = None
    n_eff: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The §3.5 metric record ``{value, ci_low, ci_high, n}`` plus ``method``, ``clusters``, ``n_eff``."""
        return asdict(self)


def _nan_estimate(n: int = 0, method: str = "none", clusters: int | None = None) -> Estimate:
    return Estimate(math.nan, math.nan, math.nan, n, method, clusters)


def wilson_bounds(p: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a proportion ``p`` observed on ``n`` units; ``n`` may be real-valued
    (an effective sample size). ``(nan, nan)`` when ``n <= 0``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"need 0 <= p <= 1, got {p}")
    if n <= 0:
        return math.nan, math.nan
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half))  # exact at p = 0 and 1


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n`` (``(nan, nan)`` when ``n == 0``)."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return math.nan, math.nan
    return wilson_bounds(successes / n, n, z)


def no_difference_halfwidth(k: int, z: float = Z_95) -> float:
    """The Wilson upper bound for 0 discordant units out of ``k``: ``z² / (k + z²)``.

    The half-width a paired difference is widened to when every one of ``k`` units agrees (the
    bootstrap has zero width), so "no difference seen on k units" keeps the uncertainty of k units.
    """
    if k <= 0:
        return math.nan
    return wilson_bounds(0.0, k, z)[1]


def floor_collapsed(est: Estimate, k: int, bounds: tuple[float, float] | None = None) -> Estimate:
    """``est`` unchanged, or ``value ± no_difference_halfwidth(k)`` (clipped to ``bounds``) when its
    interval has zero width. ``nan`` estimates are returned as they are."""
    if math.isnan(est.value) or est.ci_high - est.ci_low > 1e-12:
        return est
    h = no_difference_halfwidth(k)
    lo, hi = est.value - h, est.value + h
    if bounds is not None:
        lo, hi = max(bounds[0], lo), min(bounds[1], hi)
    return replace(est, ci_low=min(lo, est.value), ci_high=max(hi, est.value))


def rate(outcomes: Iterable[bool | None]) -> Estimate:
    """Proportion of true outcomes with a Wilson 95% interval.

    ``None`` entries are *not* counted in the denominator (use them for unparsed / abstained items and
    report them separately).
    """
    vals = [bool(o) for o in outcomes if o is not None]
    return rate_from_counts(sum(vals), len(vals))


def rate_from_counts(successes: int, n: int) -> Estimate:
    """:func:`rate` from counts."""
    if n == 0:
        return _nan_estimate(0, "wilson")
    lo, hi = wilson_interval(successes, n)
    return Estimate(successes / n, lo, hi, n, "wilson")


def complement(est: Estimate) -> Estimate:
    """``1 - est`` with the interval mirrored (e.g. defense success rate from harmful rate); ``n``,
    ``method``, ``clusters`` and ``n_eff`` are kept."""
    return replace(est, value=1.0 - est.value, ci_low=1.0 - est.ci_high, ci_high=1.0 - est.ci_low)


def percentile_ci(samples: np.ndarray, alpha: float) -> tuple[float, float]:
    """The ``1 - alpha`` percentile interval of bootstrap draws: their ``alpha/2`` and ``1 - alpha/2``
    quantiles, NaN draws dropped; ``(nan, nan)`` when no draw is a number."""
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(samples, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def bootstrap(
    units: Sequence[Any],
    statistic: Callable[[Sequence[Any]], float],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = 0.05,
) -> Estimate:
    """Percentile bootstrap of ``statistic`` over resampled ``units``.

    ``units`` are the independent things (one entry per question / behaviour / fact, each holding
    whatever the statistic needs); each resample draws ``len(units)`` of them with replacement using
    ``numpy.random.default_rng(seed)``, so results are reproducible. ``n`` is the number of units.
    """
    n = len(units)
    if n == 0:
        return _nan_estimate(0, "bootstrap")
    value = float(statistic(units))
    rng = np.random.default_rng(seed)
    draws = np.empty(n_resamples, dtype=float)
    for i in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        draws[i] = statistic([units[j] for j in idx])
    lo, hi = percentile_ci(draws, alpha)
    return Estimate(value, lo, hi, n, "bootstrap")


def group_rows(rows: Iterable[Any], key: Callable[[Any], Hashable]) -> list[list[Any]]:
    """Rows grouped by ``key`` (insertion order kept), ready to be the units of :func:`bootstrap`."""
    groups: dict[Hashable, list[Any]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return list(groups.values())


def clustered_mean(
    values: Sequence[float],
    groups: Sequence[Hashable],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = 0.05,
) -> Estimate:
    """Mean of ``values`` with a bootstrap interval that resamples whole groups (clusters).

    Rows sharing a group (e.g. the three biased variants of one question) are resampled together.
    ``n`` is the number of rows; the number of groups is what the bootstrap draws.
    """
    if len(values) != len(groups):
        raise ValueError(f"values and groups differ in length: {len(values)} vs {len(groups)}")
    if not values:
        return _nan_estimate(0, "bootstrap")
    sums, counts = _group_sums(values, groups)
    est = _ratio_bootstrap(sums, counts, n_resamples=n_resamples, seed=seed, alpha=alpha)
    return Estimate(est.value, est.ci_low, est.ci_high, len(values), "bootstrap")


def _group_sums(values: Sequence[float], groups: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    index: dict[Hashable, int] = {}
    for g in groups:
        index.setdefault(g, len(index))
    sums = np.zeros(len(index))
    counts = np.zeros(len(index))
    for v, g in zip(values, groups, strict=True):
        sums[index[g]] += float(v)
        counts[index[g]] += 1
    return sums, counts


def _ratio_bootstrap(
    sums: np.ndarray, counts: np.ndarray, *, n_resamples: int, seed: int, alpha: float
) -> Estimate:
    """Bootstrap of sum(sums)/sum(counts) resampling clusters (vectorised)."""
    k = sums.size
    value = float(sums.sum() / counts.sum())
    rng = np.random.default_rng(seed)
    draws = np.empty(n_resamples)
    for i in range(n_resamples):
        idx = rng.integers(0, k, size=k)
        c = counts[idx].sum()
        draws[i] = sums[idx].sum() / c if c > 0 else np.nan
    lo, hi = percentile_ci(draws, alpha)
    return Estimate(value, lo, hi, int(counts.sum()), "bootstrap")


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    groups: Sequence[Hashable] | None = None,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    alpha: float = 0.05,
) -> Estimate:
    """Mean of ``a - b`` over aligned pairs, with a paired cluster bootstrap interval.

    ``a[i]`` and ``b[i]`` are two measurements of the same pair (e.g. "picked the suggested option"
    on the biased and on the clean prompt). With ``groups``, pairs sharing a group are resampled
    together; without, every pair is its own unit. ``n`` is the number of pairs, ``clusters`` the
    number of groups k. Method ``"paired-cluster-bootstrap"``: the percentile interval, except that
    when it has zero width (every group agrees) it is widened to ``value ± h`` with
    ``h = no_difference_halfwidth(k)`` (clipped to [-1, 1] when every difference lies there).
    """
    if len(a) != len(b):
        raise ValueError(f"paired inputs differ in length: {len(a)} vs {len(b)}")
    diffs = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    if groups is None:
        groups = list(range(len(diffs)))
    k = len(set(groups))
    est = clustered_mean(diffs, groups, n_resamples=n_resamples, seed=seed, alpha=alpha)
    est = replace(est, method="paired-cluster-bootstrap", clusters=k)
    bounds = (-1.0, 1.0) if all(-1.0 <= d <= 1.0 for d in diffs) else None
    return floor_collapsed(est, k, bounds)


def metrics_to_dict(metrics: dict[str, Estimate]) -> dict[str, dict[str, Any]]:
    """``{name: Estimate}`` to the JSON-ready ``{name: {value, ci_low, ci_high, n, method, clusters, n_eff}}``."""
    return {name: est.to_dict() for name, est in metrics.items()}
