"""A score interval for the difference of two paired proportions, and the items a "no worse" claim needs.

Two models answer the same k items, each answer right (1) or wrong (0). Of the four cells of the
paired table only the two discordant ones carry the difference: ``b`` items where A is right and B
wrong, ``c`` where A is wrong and B right, ``Δ = (b − c) / n``.

``"paired-score"`` (:func:`tango_interval`)
    Tango's asymptotic score interval (Tango 1998, *Statistics in Medicine* 17:891–908; recommended
    by Fagerland, Lydersen & Laake 2014, *Statistics in Medicine* 33:2850–2875): the Δ₀ whose score
    statistic

    ``T(Δ₀) = (b − c − nΔ₀) / sqrt(n (2 q̃ + Δ₀ (1 − Δ₀)))``

    lies within ±z, with ``q̃`` the maximum-likelihood probability of the ``c`` cell under the
    constraint Δ = Δ₀ (the positive root of ``2n q² + (−b − c + (2n − b + c) Δ₀) q − c Δ₀ (1 − Δ₀) = 0``,
    derived from the multinomial likelihood). It behaves where a bootstrap does not: at perfect
    agreement (b = c = 0) it is ``±z²/(n + z²)`` (the uncertainty of n items, ±3.1 points at n = 120),
    and one discordant item *widens* it (0 and 1 of 120: [−4.6, +2.3] points) instead of collapsing
    the bootstrap's resamples towards zero width. Counts may be real-valued: a study pools fractional
    discordance over seeds (:func:`opct.stats.paired.pooled_paired_difference`). Checked against
    ``Tango_asymptotic_score_CI_paired_2x2`` of the R package ``contingencytables`` 3.0.0 (Fagerland et
    al.'s own code) on 16 tables (``tests/test_paired_proportions.py``).

:func:`noninferiority_power` and :func:`noninferiority_items`
    The exact probability, summed over the trinomial distribution of ``(b, c)``, that the interval's
    lower end lies above ``−margin`` when the true difference is ``delta`` and a share
    ``discordance`` of the items is answered differently; and the fewest items that reach a power.
    At no discordance every table is perfect agreement, so the claim is shown exactly when
    ``z²/(k + z²) < margin``: 189 items at a 2-point margin.

:func:`narrowest_interval`
    The narrowest score interval a pooled value on k units allows, for results whose discordant counts
    were not kept: a bound used to re-read them under the amended rule.
"""

from __future__ import annotations

import math

import numpy as np

from opct.stats.estimate import Z_95

PAIRED_SCORE = "paired-score"
_BISECTIONS = 80


def _score_statistic(b: np.ndarray, c: np.ndarray, n: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Tango's ``T(Δ₀)`` elementwise; 0 where its numerator is 0 (Δ₀ is the estimate itself)."""
    a2 = 2.0 * n
    bq = -b - c + (2.0 * n - b + c) * delta
    cq = -c * delta * (1.0 - delta)
    q = (np.sqrt(np.maximum(bq * bq - 4.0 * a2 * cq, 0.0)) - bq) / (2.0 * a2)
    numerator = b - c - n * delta
    variance = n * (2.0 * q + delta * (1.0 - delta))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = numerator / np.sqrt(np.maximum(variance, 0.0))
    infinite = np.where(numerator > 0.0, np.inf, -np.inf)  # no variance left: any other Δ₀ is excluded
    return np.where(numerator == 0.0, 0.0, np.where(np.isnan(t), infinite, t))


def _solve(b: np.ndarray, c: np.ndarray, n: np.ndarray, target: float) -> np.ndarray:
    """The Δ₀ in (−1, 1) with ``T(Δ₀) = target`` (T falls as Δ₀ rises), by bisection."""
    lo = np.full(b.shape, -1.0)
    hi = np.full(b.shape, 1.0)
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2.0
        above = _score_statistic(b, c, n, mid) > target
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return (lo + hi) / 2.0


def tango_bounds(b: np.ndarray, c: np.ndarray, n: np.ndarray, z: float = Z_95) -> tuple[np.ndarray, np.ndarray]:
    """:func:`tango_interval` for arrays of tables at once (``nan`` where ``n`` is not positive)."""
    b, c, n = (np.asarray(x, dtype=float) for x in np.broadcast_arrays(b, c, n))
    valid = n > 0
    safe_n = np.where(valid, n, 1.0)
    estimate = (b - c) / safe_n
    lower = np.where(estimate <= -1.0, -1.0, _solve(b, c, safe_n, z))
    upper = np.where(estimate >= 1.0, 1.0, _solve(b, c, safe_n, -z))
    lower = np.minimum(lower, estimate)
    upper = np.maximum(upper, estimate)
    return np.where(valid, lower, np.nan), np.where(valid, upper, np.nan)


def tango_interval(b: float, c: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """Tango's 95% score interval for ``Δ = (b − c) / n``: ``b`` pairs where A succeeds and B fails,
    ``c`` where A fails and B succeeds, ``n`` pairs in all (real-valued counts allowed).

    ``(nan, nan)`` when ``n`` is 0. Raises ValueError for a negative count or ``b + c > n``.
    """
    if min(b, c, n) < 0 or b + c > n * (1 + 1e-12):
        raise ValueError(f"need 0 <= b, c and b + c <= n, got b={b}, c={c}, n={n}")
    lower, upper = tango_bounds(np.array([b]), np.array([c]), np.array([n]), z)
    return float(lower[0]), float(upper[0])


def narrowest_interval(value: float, units: int, z: float = Z_95) -> tuple[float, float]:
    """The narrowest score interval a paired difference ``value`` on ``units`` units can have: Tango's at the
    fewest discordant units that give it (all on one side, ``|value|·units`` of them). Any real table with
    that value has at least this interval; a result whose discordant counts are not kept (one written before
    the score interval) is bounded by it."""
    if units <= 0 or value != value:
        return math.nan, math.nan
    return tango_interval(max(value, 0.0) * units, max(-value, 0.0) * units, float(units), z)


def _log_factorials(k: int) -> np.ndarray:
    return np.array([math.lgamma(i + 1.0) for i in range(k + 1)])


def noninferiority_power(items: int, discordance: float, margin: float, delta: float = 0.0,
                         z: float = Z_95) -> float:
    """The probability that Tango's interval lower end lies above ``−margin`` on ``items`` paired items,
    when the true A − B difference is ``delta`` and a share ``discordance`` of the items is answered
    differently by A and B (so ``p(A right, B wrong) = (discordance + delta) / 2``). Exact: the sum over
    every ``(b, c)`` of the trinomial, tables below 1e-12 of probability left out."""
    if items <= 0:
        raise ValueError(f"items must be positive, got {items}")
    p12, p21 = (discordance + delta) / 2.0, (discordance - delta) / 2.0
    if min(p12, p21) < 0.0 or p12 + p21 > 1.0:
        raise ValueError(f"need |delta| <= discordance <= 1, got discordance={discordance}, delta={delta}")
    if p12 + p21 == 0.0:
        lower, _ = tango_interval(0.0, 0.0, items, z)
        return 1.0 if lower > -margin else 0.0
    logf = _log_factorials(items)
    def reach(p: float) -> int:  # beyond ~12 standard deviations the tail is far below 1e-12
        return min(items, math.ceil(items * p + 12.0 * math.sqrt(items * p * (1.0 - p)) + 12.0))
    b, c = np.meshgrid(np.arange(reach(p12) + 1), np.arange(reach(p21) + 1), indexing="ij")
    keep = b + c <= items
    b, c = b[keep], c[keep]
    rest = items - b - c
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = (logf[items] - logf[b] - logf[c] - logf[rest]
                 + np.where(b > 0, b * np.log(max(p12, 1e-300)), 0.0)
                 + np.where(c > 0, c * np.log(max(p21, 1e-300)), 0.0)
                 + np.where(rest > 0, rest * np.log(max(1.0 - p12 - p21, 1e-300)), 0.0))
    prob = np.exp(log_p)
    likely = prob > 1e-12
    lower, _ = tango_bounds(b[likely], c[likely], np.full(int(likely.sum()), float(items)), z)
    return float(prob[likely][lower > -margin].sum())


def noninferiority_items(discordance: float, margin: float, power: float = 0.8, delta: float = 0.0,
                         z: float = Z_95, most: int = 5000) -> int | None:
    """The fewest paired items at which :func:`noninferiority_power` reaches ``power`` and stays there
    for the next 10 item counts (the exact power of a discrete test saw-tooths with the count); None
    when ``most`` items do not."""
    k = max(1, math.ceil(z * z * (1.0 - margin) / margin))  # fewer cannot show it even at perfect agreement
    while k <= most:
        if noninferiority_power(k, discordance, margin, delta, z) >= power and all(
                noninferiority_power(k + j, discordance, margin, delta, z) >= power for j in range(1, 11)):
            return k
        k += 1 if k < 400 else max(1, k // 200)
    return None
