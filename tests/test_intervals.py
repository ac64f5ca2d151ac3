"""opct.stats.intervals: cluster-Wilson rates (hand values, never zero width, honest on correlated data)
and paired cluster differences."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from opct.stats.estimate import Estimate, clustered_mean, no_difference_halfwidth, rate, wilson_bounds
from opct.stats.intervals import (
    cluster_rate,
    cluster_variance,
    effective_n,
    paired_cluster_difference,
    wilson_at_effective_n,
)


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
    assert est.n_eff == pytest.approx(59.0)  # p(1-p) / (p(1-p)/(n-1))
    assert _width(est) == pytest.approx(_width(plain), rel=0.02)


def test_cluster_rate_two_way_hand_values() -> None:
    # 2 x 2 grid, one row a cell, y = [[1, 0], [0, 0]]: V_a = V_b = V_ab = 1/16, V = 1/16, n_eff = 3
    est = cluster_rate([True, False, False, False], ["b1", "b1", "b2", "b2"], ["t1", "t2", "t1", "t2"])
    assert (est.value, est.clusters) == (0.25, 2) and est.n_eff == pytest.approx(3.0)
    # V_a + V_b - V_ab < 0: fall back to max(V_a, V_b) = V_a = 1/36; n_eff = (2/9)/(1/36) = 8, clipped to n = 6
    y, a, b = [0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1]
    v, k = cluster_variance(y, a, b)
    assert v == pytest.approx(1 / 36) and v == pytest.approx(cluster_variance(y, a)[0]) and k == 2
    est = cluster_rate([bool(x) for x in y], a, b)
    assert est.n_eff == 6.0 and (est.ci_low, est.ci_high) == pytest.approx(wilson_bounds(1 / 3, 6.0))
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
