"""Intervals for clustered data: cluster-Wilson rates and paired cluster differences.

Evaluation rows are rarely independent: the biased prompts of one question, the wrapped requests of
one behaviour or one template, the prompts of one safety fact rise and fall together. A plain Wilson
interval over such rows treats them as independent and is too narrow; a percentile bootstrap over
clusters is honest about the correlation but has zero width when every cluster agrees (e.g. 0 of 16).
The methods here do both jobs:

``"cluster-wilson"`` (:func:`cluster_rate`)
    Point estimate ``p = successes / n`` over the scored rows. Its variance comes from the
    cluster-robust linearisation of the ratio estimator: one-way,
    ``V = k/(k-1) · Σ_c (y_c - p·m_c)² / n²`` over the k clusters (``y_c`` successes and ``m_c`` rows
    of cluster c); two-way for crossed clusters (Cameron–Gelbach–Miller),
    ``V = V_a + V_b - V_ab`` with ``ab`` the cell of both, or ``max(V_a, V_b)`` when that is ≤ 0.
    The effective sample size ``n_eff = p(1-p)/V``, at most ``n``, feeds a Wilson interval (Wilson
    works with a real-valued n). When ``p`` is 0 or 1, or ``V`` is 0, ``n_eff`` is the number of
    clusters k (crossed: the smaller of the two), so the interval never collapses: an all-or-nothing
    result on k clusters carries the uncertainty of k units.

:func:`wilson_at_effective_n`
    The same Wilson-at-effective-n step for any statistic in [0, 1] whose variance is known some
    other way (e.g. a two-level bootstrap: awareness uses it as ``"two-level-wilson"``).

``"paired-cluster-bootstrap"`` (:func:`paired_cluster_difference`)
    A minus B over the clusters measured on both (the same units on two models), resampling the
    shared clusters jointly; the percentile interval, widened to ``value ± z²/(k + z²)`` (the Wilson
    upper bound for 0 discordant of k) when it collapses to zero width.

``"pooled-paired-bootstrap"`` (:func:`pooled_paired_difference`)
    The same paired difference measured in several cells (a model family × a training seed), pooled:
    the mean over families of the mean over seeds, with a bootstrap that resamples the seeds within
    each family and the units, the same unit draw for every cell.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from opct.stats.estimate import (
    DEFAULT_SEED,
    Estimate,
    _nan_estimate,
    _percentile_ci,
    floor_collapsed,
    wilson_bounds,
)

CLUSTER_WILSON = "cluster-wilson"
PAIRED_CLUSTER_BOOTSTRAP = "paired-cluster-bootstrap"
POOLED_PAIRED_BOOTSTRAP = "pooled-paired-bootstrap"


def effective_n(value: float, variance: float, n: float, clusters: int) -> float:
    """``value(1 - value) / variance`` clipped to at most ``n``; ``min(clusters, n)`` when ``value`` is 0
    or 1 or the variance is 0 / unknown (``nan``), so that an interval never collapses."""
    if value <= 0.0 or value >= 1.0 or not variance > 0.0:
        return float(min(clusters, n))
    return float(min(n, value * (1.0 - value) / variance))


def wilson_at_effective_n(
    value: float,
    variance: float,
    n: int,
    clusters: int,
    *,
    method: str = CLUSTER_WILSON,
    support: tuple[float, float] = (0.0, 1.0),
    max_n: float | None = None,
) -> Estimate:
    """A Wilson interval for a statistic ``value`` in [0, 1] with known ``variance`` (e.g. from a
    bootstrap), computed at the effective sample size :func:`effective_n`.

    ``n`` is the reported denominator and the ceiling of the effective n unless ``max_n`` names
    another (the number of yes/no trials underneath, e.g. prompts for a mean over facts of per-fact
    pass rates); ``clusters`` the number of independent units (the effective n when ``value`` is at an
    end of its range or ``variance`` is 0).
    A statistic whose range is ``support = (lo, hi)`` rather than [0, 1] (an area under a curve that
    starts at S(0) = 1 is at least 1/T) is mapped onto [0, 1] first and the interval mapped back.
    """
    if n <= 0 or math.isnan(value):
        return _nan_estimate(n, method, clusters)
    lo_s, hi_s = support
    if not hi_s > lo_s:
        raise ValueError(f"support must be (lo, hi) with lo < hi, got {support}")
    scale = hi_s - lo_s
    unit = min(1.0, max(0.0, (float(value) - lo_s) / scale))
    n_eff = effective_n(unit, variance / scale**2, n if max_n is None else max_n, clusters)
    lo, hi = wilson_bounds(unit, n_eff)
    value = lo_s + scale * unit
    return Estimate(value, lo_s + scale * lo, lo_s + scale * hi, n, method, clusters, n_eff)


def _oneway_variance(resid: np.ndarray, labels: Sequence[Hashable], n: int) -> tuple[float, int]:
    """Cluster-robust variance ``k/(k-1) Σ_c (Σ_{i∈c} resid_i)² / n²`` and k (``nan`` when k < 2)."""
    index: dict[Hashable, int] = {}
    codes = np.array([index.setdefault(lab, len(index)) for lab in labels], dtype=int)
    k = len(index)
    if k < 2:
        return math.nan, k
    sums = np.bincount(codes, weights=resid, minlength=k)
    return float(k / (k - 1) * np.sum(sums**2) / n**2), k


def cluster_variance(
    outcomes: Sequence[float], clusters: Sequence[Hashable], crossed: Sequence[Hashable] | None = None
) -> tuple[float, int]:
    """``(V, k)``: the cluster-robust variance of the mean of ``outcomes`` and the number of clusters.

    One-way over ``clusters``, or two-way over ``clusters`` crossed with ``crossed`` (see the module
    docstring); a crossed dimension with a single level carries no estimable variance and is dropped.
    ``V`` is ``nan`` when there are fewer than 2 clusters.
    """
    y = np.asarray(outcomes, dtype=float)
    n = y.size
    resid = y - y.mean()
    v_a, k_a = _oneway_variance(resid, clusters, n)
    if crossed is None:
        return v_a, k_a
    v_b, k_b = _oneway_variance(resid, crossed, n)
    if k_b < 2:
        return v_a, k_a
    if k_a < 2:
        return v_b, k_b
    v_ab, _ = _oneway_variance(resid, list(zip(clusters, crossed, strict=True)), n)
    v = v_a + v_b - v_ab
    return (v if v > 0 else max(v_a, v_b)), min(k_a, k_b)


def cluster_rate(
    outcomes: Sequence[bool | None],
    clusters: Sequence[Hashable],
    crossed: Sequence[Hashable] | None = None,
) -> Estimate:
    """Proportion of true ``outcomes`` with a cluster-Wilson 95% interval (method ``"cluster-wilson"``).

    ``clusters[i]`` (and ``crossed[i]``, for two-way clustering such as behaviour × template) name
    the units row i belongs to. ``None`` outcomes (unscored) are left out. ``n`` is the number of
    scored rows, ``clusters`` the number of clusters k (crossed: the smaller of the two counts),
    ``n_eff`` the effective sample size of the Wilson interval.
    """
    if len(outcomes) != len(clusters) or (crossed is not None and len(crossed) != len(outcomes)):
        raise ValueError("outcomes, clusters and crossed must have the same length")
    keep = [i for i, o in enumerate(outcomes) if o is not None]
    if not keep:
        return _nan_estimate(0, CLUSTER_WILSON, 0)
    y = [float(bool(outcomes[i])) for i in keep]
    labels = [clusters[i] for i in keep]
    other = None if crossed is None else [crossed[i] for i in keep]
    variance, k = cluster_variance(y, labels, other)
    return wilson_at_effective_n(sum(y) / len(y), variance, len(y), k)


def _shared_units(a: Mapping[Hashable, Sequence[float]], b: Mapping[Hashable, Sequence[float]]) -> list[Hashable]:
    """The units (clusters) with at least one row in both ``a`` and ``b``, in ``a``'s order."""
    return [u for u in a if u in b and len(a[u]) and len(b[u])]


def paired_cluster_difference(
    a: Mapping[Hashable, Sequence[float]],
    b: Mapping[Hashable, Sequence[float]],
    statistic: Callable[[list[Sequence[float]]], float] | None = None,
    *,
    n_resamples: int = 2000,
    seed: int = DEFAULT_SEED,
    alpha: float = 0.05,
) -> Estimate:
    """``statistic(A) - statistic(B)`` over the clusters present (non-empty) in both ``a`` and ``b``.

    ``a`` and ``b`` map a cluster (a question, a behaviour, a fact) to its row values on two models
    (the same units measured twice). ``statistic`` receives the list of per-cluster value sequences;
    the default is the pooled mean (sum of all values / count). The interval is a paired cluster
    bootstrap (method ``"paired-cluster-bootstrap"``): each resample draws the k shared clusters with
    replacement, the same draw for both models, and the percentile interval is reported. If it has zero
    width (every cluster agrees), it is widened to ``value ± z²/(k + z²)``, the Wilson upper bound for
    0 discordant out of k (clipped to [-1, 1] when every value lies in [0, 1]).

    ``n`` is the number of rows of ``a`` over the shared clusters (a paired design has as many in
    ``b``), whatever the statistic; ``clusters`` is k.
    """
    shared = _shared_units(a, b)
    k = len(shared)
    if k == 0:
        return _nan_estimate(0, PAIRED_CLUSTER_BOOTSTRAP, 0)
    ga = [a[c] for c in shared]
    gb = [b[c] for c in shared]
    n = sum(len(g) for g in ga)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, k, size=(n_resamples, k))
    if statistic is None:
        sa, ca = (np.array([float(sum(g)) for g in ga]), np.array([len(g) for g in ga], dtype=float))
        sb, cb = (np.array([float(sum(g)) for g in gb]), np.array([len(g) for g in gb], dtype=float))
        value = float(sa.sum() / ca.sum() - sb.sum() / cb.sum())
        draws = sa[idx].sum(axis=1) / ca[idx].sum(axis=1) - sb[idx].sum(axis=1) / cb[idx].sum(axis=1)
    else:
        value = float(statistic(ga)) - float(statistic(gb))
        draws = np.array([float(statistic([ga[j] for j in row])) - float(statistic([gb[j] for j in row]))
                          for row in idx])
    lo, hi = _percentile_ci(np.asarray(draws, dtype=float), alpha)
    est = Estimate(value, min(lo, value), max(hi, value), n, PAIRED_CLUSTER_BOOTSTRAP, k)
    unit = all(0.0 <= float(v) <= 1.0 for g in (*ga, *gb) for v in g)
    return floor_collapsed(est, k, (-1.0, 1.0) if unit else None)


#: One cell of a pooled comparison: ``(A, B)``, each ``{unit: [row values]}`` (see :func:`paired_cluster_difference`).
PairedCell = tuple[Mapping[Hashable, Sequence[float]], Mapping[Hashable, Sequence[float]]]


@dataclass(frozen=True)
class PooledDifference:
    """A pooled paired difference: the estimate (``n`` rows, ``clusters`` units) and what it pools.

    ``cells`` counts the (family, seed) cells with at least one shared unit; ``per_family`` and
    ``per_cell`` are the point differences the pooled value averages (cells without shared units are
    absent)."""

    estimate: Estimate
    cells: int
    per_family: dict[Hashable, float] = field(default_factory=dict)
    per_cell: dict[tuple[Hashable, Hashable], float] = field(default_factory=dict)


def pooled_paired_difference(
    cells: Mapping[tuple[Hashable, Hashable], PairedCell],
    statistic: Callable[[list[Sequence[float]]], float] | None = None,
    *,
    n_resamples: int = 2000,
    seed: int = DEFAULT_SEED,
    alpha: float = 0.05,
) -> PooledDifference:
    """``A − B`` pooled over cells keyed ``(family, seed)``, with a 95% percentile bootstrap interval.

    In each cell the difference is ``statistic(A) − statistic(B)`` over the units both have (as
    :func:`paired_cluster_difference`; default statistic: the pooled mean of the rows). The pooled
    value is the mean over families of the mean over that family's seeds: every family weighs the same,
    whatever its number of seeds.

    What one bootstrap resample draws:

    * **units**: k draws with replacement from the k units found in any cell (a unit is a question,
      behaviour, fact or item, named by the same key in every cell). The same draw, with its
      multiplicities, is applied to every cell, so a unit that is hard for every seed and every family
      counts as one unit, not as one per cell; a cell uses the drawn units it has;
    * **seeds**: within each family, as many seeds as it has, with replacement, independently per family;
    * **families** are not resampled: they are the fixed set being pooled.

    The interval is the percentile interval of the resampled pooled values; when it has zero width
    (every unit of every cell agrees) it is widened to ``value ± z²/(k + z²)`` as in
    :func:`paired_cluster_difference` (clipped to [-1, 1] when every value lies in [0, 1]). Rows are
    values that were scored: a caller leaves unscored rows out, never counts them as a success.
    ``n`` is the number of A rows over the shared units of all cells; ``clusters`` is k.
    """
    keys, shared = [], []
    for key, (a, b) in cells.items():
        units = _shared_units(a, b)
        if units:
            keys.append(key)
            shared.append(units)
    if not keys:
        return PooledDifference(_nan_estimate(0, POOLED_PAIRED_BOOTSTRAP, 0), 0)
    index: dict[Hashable, int] = {}
    for units in shared:
        for u in units:
            index.setdefault(u, len(index))
    k = len(index)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(n_resamples, k))
    counts = np.zeros((n_resamples, k))
    np.add.at(counts, (np.arange(n_resamples)[:, None], draws), 1.0)
    point = np.empty(len(keys))
    per_cell = np.empty((n_resamples, len(keys)))
    for j, (key, units) in enumerate(zip(keys, shared, strict=True)):
        a, b = cells[key]
        point[j], per_cell[:, j] = _cell_draws([a[u] for u in units], [b[u] for u in units],
                                               [index[u] for u in units], draws, counts, statistic)
    families: dict[Hashable, list[int]] = {}
    for j, (family, _) in enumerate(keys):
        families.setdefault(family, []).append(j)
    family_point = {f: float(point[js].mean()) for f, js in families.items()}
    value = float(np.mean(list(family_point.values())))
    family_draws = []
    for js in families.values():
        picked = np.asarray(js)[rng.integers(0, len(js), size=(n_resamples, len(js)))]
        family_draws.append(_nanmean(np.take_along_axis(per_cell, picked, axis=1)))
    lo, hi = _percentile_ci(_nanmean(np.column_stack(family_draws)), alpha)
    n = sum(len(cells[key][0][u]) for key, units in zip(keys, shared, strict=True) for u in units)
    est = Estimate(value, min(lo, value), max(hi, value), n, POOLED_PAIRED_BOOTSTRAP, k)
    unit = all(0.0 <= float(v) <= 1.0 for key, units in zip(keys, shared, strict=True)
               for side in cells[key] for u in units for v in side[u])
    return PooledDifference(floor_collapsed(est, k, (-1.0, 1.0) if unit else None), len(keys), family_point,
                            {key: float(point[j]) for j, key in enumerate(keys)})


def _nanmean(x: np.ndarray) -> np.ndarray:
    """The mean of each row over its finite entries (``nan`` for a row with none), without warnings."""
    finite = np.isfinite(x)
    count = finite.sum(axis=1)
    total = np.where(finite, x, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _cell_draws(ga: list[Sequence[float]], gb: list[Sequence[float]], where: list[int], draws: np.ndarray,
                counts: np.ndarray, statistic: Callable[[list[Sequence[float]]], float] | None) -> tuple[float, np.ndarray]:
    """One cell's difference on its units, and on each resample's unit draw (``draws``: indices into the
    k pooled units, ``counts`` the same draws as multiplicities per unit; ``where[i]``: the pooled index
    of the cell's unit i). ``nan`` for a draw that holds none of the cell's units."""
    k = counts.shape[1]
    if statistic is None:
        sums = np.zeros((4, k))
        for i, j in enumerate(where):
            sums[:, j] = (float(sum(ga[i])), len(ga[i]), float(sum(gb[i])), len(gb[i]))
        sa, ca, sb, cb = sums
        with np.errstate(invalid="ignore", divide="ignore"):
            resampled = counts @ sa / (counts @ ca) - counts @ sb / (counts @ cb)
        return float(sa.sum() / ca.sum() - sb.sum() / cb.sum()), resampled
    local = np.full(k, -1)
    local[where] = np.arange(len(where))
    out = np.full(len(draws), np.nan)
    for r, row in enumerate(draws):
        picked = [int(i) for i in local[row] if i >= 0]
        if picked:
            out[r] = float(statistic([ga[i] for i in picked])) - float(statistic([gb[i] for i in picked]))
    return float(statistic(ga)) - float(statistic(gb)), out
