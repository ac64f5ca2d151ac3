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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence

import numpy as np

from opct.metrics import (
    DEFAULT_SEED,
    Estimate,
    _nan_estimate,
    _percentile_ci,
    floor_collapsed,
    wilson_bounds,
)

CLUSTER_WILSON = "cluster-wilson"
PAIRED_CLUSTER_BOOTSTRAP = "paired-cluster-bootstrap"


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
    shared = [c for c in a if c in b and len(a[c]) and len(b[c])]
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
