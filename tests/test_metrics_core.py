"""opct.stats.estimate against hand-computed values."""

from __future__ import annotations

import math

import pytest

from opct.stats.estimate import (
    Z_95,
    Estimate,
    bootstrap,
    clustered_mean,
    complement,
    group_rows,
    metrics_to_dict,
    no_difference_halfwidth,
    paired_difference,
    rate,
    rate_from_counts,
    wilson_bounds,
    wilson_interval,
)


def test_wilson_hand_values() -> None:
    # p = 0.8, n = 10, z = 1.96: centre 0.71674, half-width 0.22658
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.49016, abs=1e-4) and hi == pytest.approx(0.94332, abs=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == pytest.approx(0.0) and hi == pytest.approx(0.27753, abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert hi == pytest.approx(1.0) and lo == pytest.approx(1 - 0.27753, abs=1e-4)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_rate_skips_none_and_reports_n() -> None:
    est = rate([True, False, None, True, True, None])
    assert est.value == 0.75 and est.n == 4 and est.method == "wilson"
    assert est.ci_low == pytest.approx(wilson_interval(3, 4)[0])
    empty = rate([None])
    assert empty.n == 0 and math.isnan(empty.value)
    assert rate_from_counts(3, 4) == est


def test_complement_mirrors_interval() -> None:
    asr = rate_from_counts(2, 10)
    dsr = complement(asr)
    assert dsr.value == pytest.approx(0.8) and dsr.n == 10
    assert dsr.ci_low == pytest.approx(1 - asr.ci_high) and dsr.ci_high == pytest.approx(1 - asr.ci_low)
    clustered = complement(Estimate(0.25, 0.1, 0.5, 40, "cluster-wilson", 8, 12.5))
    assert (clustered.value, clustered.ci_low, clustered.ci_high) == (0.75, 0.5, 0.9)
    assert (clustered.n, clustered.method, clustered.clusters, clustered.n_eff) == (40, "cluster-wilson", 8, 12.5)


def test_wilson_bounds_real_valued_n() -> None:
    assert wilson_bounds(0.8, 10) == pytest.approx(wilson_interval(8, 10))
    lo, hi = wilson_bounds(0.8, 12.5)
    assert wilson_interval(8, 10)[0] < lo < 0.8 < hi < wilson_interval(8, 10)[1]
    assert all(math.isnan(x) for x in wilson_bounds(0.5, 0.0))
    with pytest.raises(ValueError):
        wilson_bounds(1.5, 10)


def test_bootstrap_two_point_distribution() -> None:
    # mean of 2 draws from {0, 1}: 0 (p .25), .5 (p .5), 1 (p .25) -> 95% interval [0, 1]
    est = bootstrap([0.0, 1.0], lambda xs: sum(xs) / len(xs), n_resamples=2000, seed=1)
    assert est.value == 0.5 and est.ci_low == 0.0 and est.ci_high == 1.0 and est.n == 2
    const = bootstrap([0.3] * 5, lambda xs: sum(xs) / len(xs))
    assert (const.ci_low, const.ci_high) == pytest.approx((0.3, 0.3))
    again = bootstrap([0.0, 1.0, 1.0, 0.0, 1.0], lambda xs: sum(xs) / len(xs), seed=5)
    assert again == bootstrap([0.0, 1.0, 1.0, 0.0, 1.0], lambda xs: sum(xs) / len(xs), seed=5)
    assert bootstrap([], lambda xs: 0.0).n == 0


def test_clustered_mean_resamples_whole_groups() -> None:
    # groups a (1, 1) and b (0, 0): any resample mean is 0, .5 or 1
    est = clustered_mean([1, 1, 0, 0], ["a", "a", "b", "b"], n_resamples=500)
    assert est.value == 0.5 and est.n == 4 and est.method == "bootstrap"
    assert est.ci_low == 0.0 and est.ci_high == 1.0
    # unequal cluster sizes: value is the row mean, not the mean of cluster means
    assert clustered_mean([1, 0, 0], ["a", "b", "b"]).value == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        clustered_mean([1], ["a", "b"])


def test_paired_difference() -> None:
    # every pair agrees: the bootstrap collapses, so the interval is widened to the Wilson bound for 0 of 3
    est = paired_difference([1, 1, 1], [0, 0, 0])
    h = no_difference_halfwidth(3)
    assert h == pytest.approx(Z_95**2 / (3 + Z_95**2)) and h == pytest.approx(wilson_interval(0, 3)[1])
    assert (est.value, est.ci_high, est.n, est.clusters) == (1.0, 1.0, 3, 3)
    assert est.ci_low == pytest.approx(1.0 - h) and est.method == "paired-cluster-bootstrap"
    same = paired_difference([1, 0, 1, 1], [1, 0, 1, 1], groups=["a", "a", "b", "c"])
    assert same.value == 0.0 and same.clusters == 3
    assert (same.ci_low, same.ci_high) == pytest.approx((-no_difference_halfwidth(3), no_difference_halfwidth(3)))
    est = paired_difference([1, 0, 1, 0], [0, 0, 1, 0], groups=["q1", "q1", "q2", "q2"])
    assert est.value == pytest.approx(0.25) and est.ci_low >= 0.0 and est.ci_high <= 0.5
    with pytest.raises(ValueError):
        paired_difference([1], [1, 0])


def test_serialisation() -> None:
    d = metrics_to_dict({"x": Estimate(0.5, 0.1, 0.9, 10)})
    assert d == {"x": {"value": 0.5, "ci_low": 0.1, "ci_high": 0.9, "n": 10, "method": "wilson",
                       "clusters": None, "n_eff": None}}
    clustered = Estimate(0.5, 0.2, 0.8, 40, "cluster-wilson", 8, 12.5)
    assert Estimate(**clustered.to_dict()) == clustered
    assert Estimate(**{"value": 0.5, "ci_low": 0.1, "ci_high": 0.9, "n": 10, "method": "wilson"}).clusters is None
    assert [len(g) for g in group_rows([("a", 1), ("b", 2), ("a", 3)], key=lambda r: r[0])] == [2, 1]
