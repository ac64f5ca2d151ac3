"""opct.stats.intervals: cluster-Wilson rates (hand values, never zero width, honest on correlated data,
monotone in the number of successes) and paired cluster differences. Coverage by simulation:
tests/test_interval_coverage.py."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from opct.stats.estimate import Estimate, clustered_mean, no_difference_halfwidth, rate, wilson_bounds
from opct.stats.intervals import (
    _t_critical,
    cluster_rate,
    cluster_rate_from_counts,
    cluster_variance,
    effective_n,
    reach_n,
    wilson_at_effective_n,
)
from opct.stats.paired import paired_cluster_difference


def _width(est: Estimate) -> float:
    return est.ci_high - est.ci_low


def test_cluster_rate_one_way_hand_values() -> None:
    # clusters a [1, 1], b [0, 0], c [1, 0]: p = .5, residual sums +1, -1, 0
    # V = 3/2 * 2 / 36 = 1/12, n_eff = .25 / (1/12) = 3
    est = cluster_rate([True, True, False, False, True, False], ["a", "a", "b", "b", "c", "c"])
    assert (est.value, est.n, est.clusters, est.method) == (0.5, 6, 3, "cluster-wilson")
    assert est.n_eff == pytest.approx(3.0)
    assert (est.ci_low, est.ci_high) == pytest.approx(wilson_bounds(0.5, 3.0))
    # unscored rows leave every count
    with_none = cluster_rate([True, None, True, False, False, True, False, None],
                             ["a", "a", "a", "b", "b", "c", "c", "d"])
    assert with_none == est
    assert cluster_rate([None, None], ["a", "b"]).n == 0 and math.isnan(cluster_rate([], []).value)
    with pytest.raises(ValueError):
        cluster_rate([True], ["a", "b"])


def test_cluster_rate_independent_rows_is_close_to_wilson() -> None:
    outcomes = [i % 3 == 0 for i in range(60)]
    est, plain = cluster_rate(outcomes, list(range(60))), rate(outcomes)
    # One row a cluster: the cluster-robust variance p(1-p)/(n-1) exceeds the all-or-nothing maximum
    # p(1-p)/k_eff = p(1-p)/n, so it is capped there (the old rule gave n_eff = 59 = n - 1); with
    # k_eff = n the cluster-Wilson interval is the plain Wilson interval.
    assert est.n_eff == pytest.approx(60.0)
    assert (est.ci_low, est.ci_high) == pytest.approx((plain.ci_low, plain.ci_high))


def test_cluster_rate_two_way_hand_values() -> None:
    # 2 x 2 grid, one row a cell, y = [[1, 0], [0, 0]]: V_a = V_b = V_ab = 1/16, V = 1/16
    y4, b4, t4 = [True, False, False, False], ["b1", "b1", "b2", "b2"], ["t1", "t2", "t1", "t2"]
    assert cluster_variance(y4, b4, t4) == (pytest.approx(1 / 16), 2)
    # p(1-p)/V = 3 (the old n_eff), times (z / t_1)² = 0.024 for k = 2 clusters: below the Kish floor
    # k_eff = min(4²/8, 4²/8) = 2, so n_eff = 2 (was 3)
    est = cluster_rate(y4, b4, t4)
    assert (est.value, est.clusters) == (0.25, 2) and est.n_eff == pytest.approx(2.0)
    # V_a + V_b - V_ab < 0: fall back to max(V_a, V_b) = V_a = 1/36; p(1-p)/V = (2/9)/(1/36) = 8, clipped to n = 6
    y, a, b = [0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1]
    v, k = cluster_variance(y, a, b)
    assert v == pytest.approx(1 / 36) and v == pytest.approx(cluster_variance(y, a)[0]) and k == 2
    # 6 · (z / t_1)² = 0.14 is below the floor k_eff = min(6²/12, 6²/18) = 2: n_eff = 2 (was 6, the
    # plain-Wilson width for 2 clusters)
    est = cluster_rate([bool(x) for x in y], a, b)
    assert est.n_eff == pytest.approx(2.0) and (est.ci_low, est.ci_high) == pytest.approx(wilson_bounds(1 / 3, 2.0))
    # a crossed dimension with one level carries no estimable variance: one-way over the other
    assert cluster_rate([bool(x) for x in y], a, ["t"] * 6) == cluster_rate([bool(x) for x in y], a)


@pytest.mark.parametrize("n", [1, 2, 5, 16, 113])
@pytest.mark.parametrize("hit", [False, True])
def test_all_or_nothing_never_collapses(n: int, hit: bool) -> None:
    est = cluster_rate([hit] * n, [i // 4 for i in range(n)])
    k = len({i // 4 for i in range(n)})
    assert est.clusters == k and est.n_eff == k and _width(est) > 0
    assert (est.ci_low, est.ci_high) == pytest.approx(wilson_bounds(float(hit), k))


def test_never_zero_width_on_random_inputs() -> None:
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 25)
        outcomes = [rng.random() < rng.choice([0.0, 0.1, 0.5, 1.0]) for _ in range(n)]
        clusters = [rng.randint(0, rng.randint(0, 6)) for _ in range(n)]
        crossed = [rng.randint(0, 3) for _ in range(n)] if rng.random() < 0.5 else None
        est = cluster_rate(outcomes, clusters, crossed)
        assert _width(est) > 0 and est.ci_low <= est.value <= est.ci_high, (outcomes, clusters, crossed)


def _questions(seed: int) -> tuple[list[bool], list[int]]:
    """The issue's shape: 113 prompts from 31 questions, answers strongly tied to the question."""
    rng = np.random.default_rng(seed)
    sizes = np.full(31, 3)
    sizes[:20] += 1
    p_question = rng.beta(0.3, 0.3, size=31)
    outcomes: list[bool] = []
    clusters: list[int] = []
    for q, (m, p) in enumerate(zip(sizes, p_question, strict=True)):
        outcomes += [bool(x) for x in rng.random(m) < p]
        clusters += [q] * int(m)
    return outcomes, clusters


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_correlated_questions_wider_than_wilson_close_to_cluster_bootstrap(seed: int) -> None:
    outcomes, clusters = _questions(seed)
    assert len(outcomes) == 113 and len(set(clusters)) == 31
    est = cluster_rate(outcomes, clusters)
    boot = clustered_mean([float(o) for o in outcomes], clusters, n_resamples=2000)
    assert est.clusters == 31 and est.n == 113 and est.n_eff < 60
    assert _width(est) > 1.4 * _width(rate(outcomes))
    assert _width(est) == pytest.approx(_width(boot), rel=0.15)


def test_crossed_behaviours_and_templates_wider_than_wilson() -> None:
    # 16 behaviours x 12 templates, template effects dominate (the static jailbreak shape)
    rng = np.random.default_rng(4)
    beh, tem = rng.normal(0, 1.0, 16), rng.normal(0, 1.5, 12)
    outcomes, bs, ts = [], [], []
    for i in range(16):
        for j in range(12):
            outcomes.append(bool(rng.random() < 1 / (1 + math.exp(-(0.7 + beh[i] + tem[j])))))
            bs.append(f"b{i}")
            ts.append(f"t{j}")
    crossed = cluster_rate(outcomes, bs, ts)
    by_template = clustered_mean([float(o) for o in outcomes], ts, n_resamples=2000)
    assert crossed.clusters == 12 and crossed.n == 192
    assert _width(crossed) > 1.8 * _width(rate(outcomes))
    assert _width(crossed) >= 0.9 * _width(by_template)
    assert _width(crossed) > _width(cluster_rate(outcomes, bs))


def test_wilson_at_effective_n() -> None:
    # ausc_101 over 16 facts that all fail: 1/101 with zero bootstrap variance -> Wilson at n_eff = 16
    est = wilson_at_effective_n(1 / 101, 0.0, 16, 16, method="two-level-wilson")
    assert est.n_eff == 16 and est.method == "two-level-wilson" and est.clusters == 16
    assert est.ci_low < 1 / 101 < est.ci_high and _width(est) > 0.1
    interior = wilson_at_effective_n(0.4, 0.4 * 0.6 / 25, 100, 10)
    assert interior.n_eff == pytest.approx(25.0) and (interior.ci_low, interior.ci_high) == pytest.approx(
        wilson_bounds(0.4, 25.0))
    assert wilson_at_effective_n(0.4, 1e-9, 100, 10).n_eff == 100  # clipped to n
    assert effective_n(0.5, math.nan, 40, 8) == 8 and effective_n(1.0, 0.01, 40, 8) == 8
    # max_n: the ceiling is the trials underneath (prompts), n stays the reported denominator (facts)
    capped = wilson_at_effective_n(0.4, 0.4 * 0.6 / 500, 20, 20, max_n=1000)
    assert capped.n == 20 and capped.n_eff == pytest.approx(500)
    # support: an area that is at least 1/9 is mapped onto [0, 1] and back
    area = wilson_at_effective_n(1 / 9, 0.0, 16, 16, support=(1 / 9, 1.0))
    assert area.ci_low == pytest.approx(1 / 9) and area.ci_high == pytest.approx(1 / 9 + 8 / 9 * wilson_bounds(0, 16)[1])
    with pytest.raises(ValueError):
        wilson_at_effective_n(0.5, 0.01, 10, 5, support=(1.0, 1.0))
    assert math.isnan(wilson_at_effective_n(0.5, 0.01, 0, 0).value)


def test_paired_identical_models_have_width_and_contain_zero() -> None:
    a = {f"q{i}": [float(i % 2), 1.0, 0.0] for i in range(31)}
    est = paired_cluster_difference(a, {k: list(v) for k, v in a.items()})
    h = no_difference_halfwidth(31)
    assert est.value == 0.0 and (est.ci_low, est.ci_high) == pytest.approx((-h, h))
    assert (est.n, est.clusters, est.method) == (93, 31, "paired-cluster-bootstrap")
    # an all-agreeing difference at the edge stays inside [-1, 1]
    edge = paired_cluster_difference({i: [1.0] for i in range(5)}, {i: [0.0] for i in range(5)})
    assert edge.value == 1.0 and edge.ci_high == 1.0 and edge.ci_low == pytest.approx(1 - no_difference_halfwidth(5))


def test_paired_detects_a_real_shift() -> None:
    rng = random.Random(0)
    base = {f"b{i}": [float(rng.random() < 0.2 + 0.6 * (i % 2)) for _ in range(4)] for i in range(40)}
    better = {k: [1.0 if rng.random() < 0.5 else v for v in vals] for k, vals in base.items()}
    est = paired_cluster_difference(better, base)
    assert est.value > 0.15 and est.ci_low > 0 and est.clusters == 40
    assert est == paired_cluster_difference(better, base)  # seeded
    # the paired interval is narrower than treating the two models as independent samples
    assert _width(est) < _width(rate([v > 0 for vals in better.values() for v in vals])) * 2
    # clusters only one model has are left out; a custom statistic (mean of cluster means) works
    extra = {**better, "only_a": [1.0]}
    assert paired_cluster_difference(extra, base).clusters == 40

    def mean_of_means(groups: list) -> float:
        return sum(sum(g) / len(g) for g in groups) / len(groups)

    custom = paired_cluster_difference(better, base, mean_of_means, n_resamples=300)
    assert custom.value == pytest.approx(est.value) and custom.ci_low > 0
    assert math.isnan(paired_cluster_difference({"a": [1.0]}, {"b": [1.0]}).value)


# --- monotone in the number of successes -----------------------------------------------------------


def _rows(successes: list[int], sizes: list[int]) -> tuple[list[bool], list[int]]:
    """Rows of a one-way layout: cluster c has ``sizes[c]`` rows, the first ``successes[c]`` true."""
    outcomes: list[bool] = []
    clusters: list[int] = []
    for c, (s, m) in enumerate(zip(successes, sizes, strict=True)):
        outcomes += [True] * s + [False] * (m - s)
        clusters += [c] * m
    return outcomes, clusters


def _concentrated(sizes: list[int], by_size: str | None = None) -> list[int]:
    """The cluster of each success in turn, filling one cluster after another (in layout order, or
    largest / smallest first)."""
    order = list(range(len(sizes)))
    if by_size is not None:
        order.sort(key=lambda c: -sizes[c] if by_size == "largest" else sizes[c])
    return [c for c in order for _ in range(sizes[c])]


def _spread(sizes: list[int]) -> list[int]:
    """One success per cluster in turn (round robin, skipping full clusters): the deterministic row
    order of a layout whose rows are interleaved across clusters."""
    left, out = list(sizes), []
    while any(left):
        for c in range(len(left)):
            if left[c]:
                out.append(c)
                left[c] -= 1
    return out


def _bounds_along(sizes: list[int], placement: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of :func:`cluster_rate` for x = 0, 1, ..., n successes added in ``placement``."""
    counts = [0] * len(sizes)
    lows, highs = [], []
    for x in range(len(placement) + 1):
        est = cluster_rate(*_rows(counts, sizes))
        assert est.n == sum(sizes) and _width(est) > 0
        lows.append(est.ci_low)
        highs.append(est.ci_high)
        if x < len(placement):
            counts[placement[x]] += 1
    return np.array(lows), np.array(highs)


def test_bug_zero_versus_one_success_of_768_rows_in_16_clusters() -> None:
    sizes = [48] * 16
    zero = cluster_rate(*_rows([0] * 16, sizes))
    one = cluster_rate(*_rows([1] + [0] * 15, sizes))
    # 0 successes: the uncertainty of 16 units, [0, z²/(16 + z²)] = [0, 19.4%]
    assert (zero.ci_low, zero.ci_high, zero.n_eff) == (0.0, pytest.approx(0.19361, abs=1e-5), 16.0)
    # 1 success: the old rule gave n_eff = 767 and [0.02%, 0.73%], an upper bound 26 times lower than
    # for 0 successes. Now n_eff is the largest n whose interval still reaches 19.4% (16.2)
    assert one.ci_high == pytest.approx(zero.ci_high) and one.ci_low > zero.ci_low
    assert one.n_eff == pytest.approx(reach_n(1 / 768, 16)) and 16 < one.n_eff < 16.3
    assert one.ci_high >= zero.ci_high - 1e-12


LAYOUTS = {
    "768 rows in 16 clusters of 48": [48] * 16,
    "100 rows in 10 clusters of 10": [10] * 10,
    "192 rows in 12 clusters of 16": [16] * 12,
    "250 rows in 20 clusters of 3..22": list(range(3, 23)),
    "100 rows in 9 clusters of 1..34": [1, 2, 3, 5, 8, 13, 21, 34, 13],
    "180 rows in 18 clusters of 5, 10, 15": [5, 10, 15] * 6,
}


@pytest.mark.parametrize(("layout", "placement"), [
    *[(name, "concentrated") for name in LAYOUTS if len(set(LAYOUTS[name])) == 1 or name.startswith("250")],
    *[(name, "largest first") for name in LAYOUTS],
    *[(name, "smallest first") for name in LAYOUTS],
    *[(name, "spread") for name in LAYOUTS if not name.startswith("100 rows in 9")],
])
def test_bounds_never_decrease_as_successes_are_added(layout: str, placement: str) -> None:
    """Every x from 0 to n, successes added in a fixed deterministic order: one cluster filled after
    another ("concentrated": layout order; or by cluster size) or one success per cluster in turn
    ("spread"). Both bounds must be non-decreasing in x.

    Not every (layout, order) pair is listed: on uneven layouts the cluster-robust variance can narrow
    the interval by more than one success moves it (module docstring of :mod:`opct.stats.intervals`),
    which happens when the uneven 9-cluster layout is filled in layout order or spread (drops up to
    0.016) and the 5/10/15 layout in layout order (0.002). Those are covered, with a tolerance, by
    :func:`test_drops_on_arbitrary_placements_are_small`; the ends are exact for every order.
    """
    sizes = LAYOUTS[layout]
    order = {"concentrated": _concentrated(sizes), "largest first": _concentrated(sizes, "largest"),
             "smallest first": _concentrated(sizes, "smallest"), "spread": _spread(sizes)}[placement]
    lows, highs = _bounds_along(sizes, order)
    assert lows[0] == 0.0 and highs[-1] == 1.0
    assert np.all(np.diff(lows) >= -1e-12), (int(np.argmin(np.diff(lows))), float(np.diff(lows).min()))
    assert np.all(np.diff(highs) >= -1e-12), (int(np.argmin(np.diff(highs))), float(np.diff(highs).min()))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_drops_on_arbitrary_placements_are_small(layout: str) -> None:
    """Two seeded random placements, plus the deterministic orders left out above: across the ends
    (0 -> 1 and n-1 -> n successes) the interval is monotone exactly, whatever the order; elsewhere
    the plug-in variance can lower a bound a little when a success lands in a cluster that is below
    average (no interval that is a function of the estimated variance, and narrows with it, avoids
    that for every placement). This pins how little: at most 0.02 on these layouts. The largest
    drops found: 0.016 (100 rows in 9 clusters of 1..34, spread), 0.011 (same layout, random),
    0.007 (10 clusters of 10, random), 0.0005 (768 rows in 16 clusters, random)."""
    sizes = LAYOUTS[layout]
    orders = [_concentrated(sizes), _spread(sizes)]
    for seed in range(2):
        order = _concentrated(sizes)
        np.random.default_rng(seed).shuffle(order)
        orders.append(order)
    for order in orders:
        lows, highs = _bounds_along(sizes, order)
        drops = np.minimum(np.diff(lows), np.diff(highs))
        assert drops.min() >= -0.02
        ends = np.concatenate([np.diff(lows)[[0, -1]], np.diff(highs)[[0, -1]]])
        assert ends.min() >= -1e-12  # exact up to rounding: the bound at 1 success is the one at 0


def test_reach_n_and_effective_n_at_the_ends() -> None:
    z2 = 1.959963984540054**2
    for k in (1, 2, 3, 8, 16, 50):
        u = z2 / (k + z2)
        assert reach_n(0.0, k) == pytest.approx(k) and reach_n(1.0, k) == pytest.approx(k)
        if u > 0.5:  # k <= 3: the interval of 0 of k reaches past 1/2, both ends bind (the nearer wins)
            assert reach_n(0.5, k) == pytest.approx(z2 * u * (1 - u) / (u - 0.5) ** 2)
            continue
        for p in (0.25 * u, 0.5 * u, 0.9 * u):
            # the interval at reach_n(p) reaches exactly the upper bound of 0 of k, and its mirror
            assert wilson_bounds(p, reach_n(p, k))[1] == pytest.approx(u)
            assert wilson_bounds(1 - p, reach_n(1 - p, k))[0] == pytest.approx(1 - u)
            assert reach_n(p, k) > reach_n(0.5 * p, k) >= k
    assert reach_n(0.5, 16) == math.inf
    # a tiny rate with a tiny variance (1 of 768 at the binomial variance) is held near k, not 767
    assert effective_n(1 / 768, (1 / 768) * (767 / 768) / 767, 768, 16) == pytest.approx(reach_n(1 / 768, 16))
    # a variance of 0 away from the ends puts no limit of its own (the old rule gave k)
    assert effective_n(0.5, 0.0, 40, 8) == 40 and effective_n(0.02, 0.0, 40, 8) == pytest.approx(reach_n(0.02, 8))


def test_t_critical_values() -> None:
    table = {1: 12.7062047, 2: 4.3026527, 7: 2.3646243, 15: 2.1314495, 30: 2.0422725, 120: 1.9799304,
             1000: 1.9623391}
    for df, t in table.items():
        assert _t_critical(df) == pytest.approx(t, abs=1e-6)
    assert _t_critical(0) == pytest.approx(1.959963984540054)


def test_kish_floor_all_or_nothing_clusters() -> None:
    # rows constant within their cluster (every cluster all or nothing): the variance is the largest
    # possible, p(1-p)/k_eff, and n_eff is Kish's k_eff (k for equal clusters), not k - 1 or less
    est = cluster_rate(*_rows([5] * 4 + [0] * 6, [5] * 10))
    assert est.n_eff == pytest.approx(10.0) and (est.ci_low, est.ci_high) == pytest.approx(wilson_bounds(0.4, 10))
    sizes = [2, 4, 6, 8, 10, 12]
    est = cluster_rate(*_rows([2, 0, 6, 0, 10, 0], sizes))
    k_eff = sum(sizes) ** 2 / sum(m * m for m in sizes)
    assert est.n_eff == pytest.approx(k_eff) and est.clusters == 6


def test_cluster_rate_from_counts_matches_cluster_rate() -> None:
    rng = np.random.default_rng(11)
    for _ in range(30):
        k = int(rng.integers(1, 12))
        sizes = [int(m) for m in rng.integers(1, 9, size=k)]
        successes = [int(rng.integers(0, m + 1)) for m in sizes]
        a, b = cluster_rate(*_rows(successes, sizes)), cluster_rate_from_counts(successes, sizes)
        assert (a.n, a.clusters, a.method) == (b.n, b.clusters, b.method)
        assert (a.value, a.ci_low, a.ci_high, a.n_eff) == pytest.approx((b.value, b.ci_low, b.ci_high, b.n_eff))
    assert cluster_rate_from_counts([0, 2], [0, 3]).clusters == 1  # empty clusters are not clusters
    assert math.isnan(cluster_rate_from_counts([0], [0]).value)
    with pytest.raises(ValueError):
        cluster_rate_from_counts([3], [2])
