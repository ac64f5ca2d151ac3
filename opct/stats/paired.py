"""Paired differences between two models measured on the same units, and their pooling over a study.

``"paired-cluster-bootstrap"`` (:func:`paired_cluster_difference`)
    A minus B over the clusters measured on both (the same units on two models), resampling the
    shared clusters jointly; the percentile interval, widened to ``value ± z²/(k + z²)`` (the Wilson
    upper bound for 0 discordant of k) when it collapses to zero width.

``"pooled-paired-bootstrap"`` (:func:`pooled_paired_difference`)
    The same paired difference measured in several cells (a model family × a training seed), pooled:
    the mean over families of the mean over seeds, with a bootstrap that resamples the seeds within
    each family and the units, the same unit draw for every cell.

``"paired-score"`` (either function with ``score=True``; :mod:`opct.stats.paired_proportions`)
    For right/wrong rows that pair one to one (each unit has as many rows on A as on B, the i-th with
    the i-th), the bootstrap interval widened at each end to Tango's score interval at k units: the
    shares of rows where only A is right (``p₊``) and only B is right (``p₋``), pooled as the value is
    (mean over families of the mean over seeds), taken as ``p₊·k`` and ``p₋·k`` discordant units of
    k. The unit is the unit of inference: seeds and repeated rows average within it, never count as
    new units. It is what a "no worse within a margin" claim reads (capability, issue 71): at perfect
    agreement it is ``±z²/(k + z²)`` like the bootstrap's floor, and one discordant unit widens it, where
    the bootstrap narrows. Rows that are not 0/1, or do not pair, keep the bootstrap interval and its
    method name.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from opct.stats.estimate import (
    DEFAULT_SEED,
    Estimate,
    _nan_estimate,
    floor_collapsed,
    percentile_ci,
)
from opct.stats.paired_proportions import PAIRED_SCORE, tango_interval

PAIRED_CLUSTER_BOOTSTRAP = "paired-cluster-bootstrap"
POOLED_PAIRED_BOOTSTRAP = "pooled-paired-bootstrap"


def discordant_shares(ga: Sequence[Sequence[float]], gb: Sequence[Sequence[float]]) -> tuple[float, float] | None:
    """``(p₊, p₋)``: the shares of rows where only A is right and only B is right, when every value is 0 or 1
    and each unit's rows pair one to one (as many on A as on B); None otherwise."""
    plus = minus = rows = 0
    for a_rows, b_rows in zip(ga, gb, strict=True):
        if len(a_rows) != len(b_rows):
            return None
        for x, y in zip(a_rows, b_rows, strict=True):
            if x not in (0, 1) or y not in (0, 1):
                return None
            plus += x > y
            minus += y > x
            rows += 1
    return (plus / rows, minus / rows) if rows else None


def score_widened(est: Estimate, shares: tuple[float, float] | None, k: int) -> Estimate:
    """``est`` with each end widened to Tango's score interval for ``shares`` (``(p₊, p₋)``) of ``k`` units,
    method :data:`~opct.stats.paired_proportions.PAIRED_SCORE`; ``est`` unchanged when ``shares`` is None
    (rows that are not right/wrong pairs) or it is ``nan``."""
    if shares is None or est.value != est.value or k <= 0:
        return est
    lower, upper = tango_interval(shares[0] * k, shares[1] * k, float(k))
    # an end within rounding of the bootstrap's (its floor at perfect agreement is the same ±z²/(k + z²)) stays as it is
    ci_low = est.ci_low if lower > est.ci_low - 1e-12 else lower
    ci_high = est.ci_high if upper < est.ci_high + 1e-12 else upper
    return replace(est, ci_low=ci_low, ci_high=ci_high, method=PAIRED_SCORE)


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
    score: bool = False,
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
    ``b``), whatever the statistic; ``clusters`` is k. ``score``: with the default statistic, widen
    the interval to the paired score interval (method ``"paired-score"``, see the module docstring).
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
    lo, hi = percentile_ci(np.asarray(draws, dtype=float), alpha)
    est = Estimate(value, min(lo, value), max(hi, value), n, PAIRED_CLUSTER_BOOTSTRAP, k)
    unit = all(0.0 <= float(v) <= 1.0 for g in (*ga, *gb) for v in g)
    est = floor_collapsed(est, k, (-1.0, 1.0) if unit else None)
    return paired_score_widened(est, a, b) if score and statistic is None else est


def paired_score_widened(est: Estimate, a: Mapping[Hashable, Sequence[float]],
                         b: Mapping[Hashable, Sequence[float]]) -> Estimate:
    """:func:`paired_cluster_difference`'s bootstrap ``est`` of ``a − b`` (default statistic) widened to the paired
    score interval of the rows they share (what ``score=True`` returns), without a second bootstrap."""
    shared = _shared_units(a, b)
    return score_widened(est, discordant_shares([a[u] for u in shared], [b[u] for u in shared]), len(shared))


#: One cell of a pooled comparison: ``(A, B)``, each ``{unit: [row values]}`` (see :func:`paired_cluster_difference`).
PairedCell = tuple[Mapping[Hashable, Sequence[float]], Mapping[Hashable, Sequence[float]]]


@dataclass(frozen=True)
class PooledDifference:
    """A pooled paired difference: the estimate (``n`` rows, ``clusters`` units) and what it pools.

    ``cells`` counts the (family, seed) cells with at least one shared unit; ``per_family`` and
    ``per_cell`` are the point differences the pooled value averages (cells without shared units are
    absent); ``draws`` are the pooled value's bootstrap resamples the interval is read from (``nan``
    for a resample that held no shared unit; empty when nothing was measured), for an analysis that
    propagates them (:mod:`opct.report.dose_response`)."""

    estimate: Estimate
    cells: int
    per_family: dict[Hashable, float] = field(default_factory=dict)
    per_cell: dict[tuple[Hashable, Hashable], float] = field(default_factory=dict)
    draws: np.ndarray = field(default_factory=lambda: np.empty(0), compare=False, repr=False)
    #: With ``score=True``: the bootstrap estimate before it was widened to the score interval; else None.
    bootstrap: Estimate | None = None


def pooled_paired_difference(
    cells: Mapping[tuple[Hashable, Hashable], PairedCell],
    statistic: Callable[[list[Sequence[float]]], float] | None = None,
    *,
    n_resamples: int = 2000,
    seed: int = DEFAULT_SEED,
    alpha: float = 0.05,
    score: bool = False,
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
    ``n`` is the number of A rows over the shared units of all cells; ``clusters`` is k. ``score``: with
    the default statistic, widen the interval to the paired score interval at k units, the discordant
    shares pooled as the value is (method ``"paired-score"``, see the module docstring).
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
    pooled_draws = _nanmean(np.column_stack(family_draws))
    lo, hi = percentile_ci(pooled_draws, alpha)
    n = sum(len(cells[key][0][u]) for key, units in zip(keys, shared, strict=True) for u in units)
    est = Estimate(value, min(lo, value), max(hi, value), n, POOLED_PAIRED_BOOTSTRAP, k)
    unit = all(0.0 <= float(v) <= 1.0 for key, units in zip(keys, shared, strict=True)
               for side in cells[key] for u in units for v in side[u])
    est = floor_collapsed(est, k, (-1.0, 1.0) if unit else None)
    bootstrap = est if score else None
    if score and statistic is None:
        est = score_widened(est, _pooled_shares(cells, keys, shared, families), k)
    return PooledDifference(est, len(keys), family_point, {key: float(point[j]) for j, key in enumerate(keys)},
                            pooled_draws, bootstrap)


def _pooled_shares(cells: Mapping[tuple[Hashable, Hashable], PairedCell], keys: list[tuple[Hashable, Hashable]],
                   shared: list[list[Hashable]], families: Mapping[Hashable, list[int]]) -> tuple[float, float] | None:
    """The discordant shares ``(p₊, p₋)`` pooled as the value is (the mean over families of the mean over each
    family's cells); None when a cell's rows are not right/wrong pairs."""
    per_cell = []
    for key, units in zip(keys, shared, strict=True):
        a, b = cells[key]
        shares = discordant_shares([a[u] for u in units], [b[u] for u in units])
        if shares is None:
            return None
        per_cell.append(shares)
    by_family = [np.mean([per_cell[j] for j in js], axis=0) for js in families.values()]
    plus, minus = np.mean(by_family, axis=0)
    return float(plus), float(minus)


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
