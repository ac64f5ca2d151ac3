"""The pre-registered dose-response analysis (docs/mechanism.md): slope, bootstrap intervals, readings, dose."""

from __future__ import annotations

import math

import numpy as np
import pytest

from opct.report.dose_response import Dose, primary_dose
from opct.report.pooled import HOLDS, NOT_MEASURED, NOT_RESOLVED, REVERSED
from opct.stats.estimate import Estimate
from opct.stats.paired import PooledDifference, pooled_paired_difference
from opct_lab.report.trend import (
    AGAINST,
    DOSE_STILL,
    NOT_READ,
    SUPPORTED,
    LevelPoint,
    dose_moves,
    level_weight,
    read_hypothesis,
    trend,
    wls_slope,
)


def level(name: str, dose: float, value: float, sd: float, seed: int, resamples: int = 2000) -> LevelPoint:
    """A level whose D has a 95% interval of exactly ``value ± 1.96·sd`` and normal bootstrap draws around it."""
    draws = np.random.default_rng(seed).normal(value, sd, resamples)
    est = Estimate(value, value - 1.96 * sd, value + 1.96 * sd, 100, "pooled-paired-bootstrap", 50)
    return LevelPoint(name, dose, PooledDifference(est, 3, draws=draws))


def test_the_slope_is_the_hand_computed_weighted_least_squares_slope():
    # x = 0, 1, 2; D = 0, 0.1, 0.3; s = 0.1, 0.1, 0.2 -> w = 100, 100, 25.
    # x̄ = 150/225, D̄ = 17.5/225; Σw(x−x̄)(D−D̄) = 13.333…, Σw(x−x̄)² = 100 -> β = 2/15.
    points = [level("L1", 0.0, 0.0, 0.1, 0), level("L2", 1.0, 0.1, 0.1, 1), level("L3", 2.0, 0.3, 0.2, 2)]
    assert [level_weight(p.difference) for p in points] == pytest.approx([100.0, 100.0, 25.0])
    result = trend(points, "higher")
    assert result.beta == pytest.approx(2 / 15)
    assert wls_slope([0.0, 1.0, 2.0], np.array([0.0, 0.1, 0.3]), [1.0, 1.0, 1.0]) == pytest.approx(0.15)
    # the bootstrap slope of independent normal draws: sd of β = sqrt(Σ w²(x−x̄)² sd²) / Σw(x−x̄)²
    dx = np.array([0.0, 1.0, 2.0]) - 150 / 225
    expected_sd = math.sqrt(float(((np.array([100, 100, 25]) * dx) ** 2 * np.array([0.01, 0.01, 0.04])).sum())) / 100
    assert (result.ci[1] - result.ci[0]) / (2 * 1.96) == pytest.approx(expected_sd, rel=0.1)
    assert result.ci_bonferroni[0] < result.ci[0] < result.beta < result.ci[1] < result.ci_bonferroni[1]
    assert result.resamples == 2000


def test_each_resample_uses_the_same_weights_and_drops_levels_without_a_value():
    points = [level("L1", 0.0, 0.0, 0.1, 0, 10), level("L2", 1.0, 0.1, 0.1, 1, 10), level("L3", 2.0, 0.3, 0.2, 2, 10)]
    points[1].difference.draws[3] = math.nan
    result = trend(points, "higher")
    assert result.resamples == 9
    columns = np.vstack([p.difference.draws for p in points])
    expected = [wls_slope([0.0, 1.0, 2.0], columns[:, b], [100.0, 100.0, 25.0]) for b in range(10) if b != 3]
    assert result.ci[0] == pytest.approx(np.quantile(expected, 0.025))


@pytest.mark.parametrize(("values", "direction", "reading"), [
    ((0.0, 0.2, 0.4), "higher", HOLDS),
    ((0.0, -0.2, -0.4), "lower", HOLDS),
    ((0.0, -0.2, -0.4), "higher", REVERSED),
    ((0.0, 0.2, 0.4), "lower", REVERSED),
])
def test_a_resolved_trend_is_read_against_the_papers_side(values, direction, reading):
    points = [level(f"L{i}", float(i), v, 0.02, i) for i, v in enumerate(values)]
    result = trend(points, direction)
    assert result.reading == reading and result.reading_bonferroni == reading


def test_a_wide_trend_is_not_resolved_and_one_level_is_not_measured():
    wide = [level(f"L{i}", float(i), v, 0.5, i) for i, v in enumerate((0.0, 0.05, 0.1))]
    assert trend(wide, "higher").reading == NOT_RESOLVED
    assert trend(wide[:1], "higher").reading == NOT_MEASURED
    same_dose = [level(f"L{i}", 1.0, v, 0.02, i) for i, v in enumerate((0.0, 0.2))]
    assert math.isnan(trend(same_dose, "higher").beta)


def trends(**values: tuple[tuple[float, ...], str, float]):
    return {key: trend([level(f"L{i}", float(i), v, sd, 10 * i + len(key)) for i, v in enumerate(vs)], side)
            for key, (vs, side, sd) in values.items()}


MOVED = (Dose(-1.0, -1.2, -0.8), Dose(-5.0, -5.5, -4.5))


def test_the_hypothesis_is_supported_by_one_safety_trend_at_the_bonferroni_level_and_no_reversal():
    found = trends(dsr_adaptive=((0.0, 0.2, 0.4), "higher", 0.02), sycophancy=((0.0, 0.0, 0.0), "lower", 0.3),
                   awareness=((0.1, 0.1, 0.1), "higher", 0.3), **{"cap:facts": ((0.0, 0.01, 0.0), "higher", 0.3)},
                   dsr_fixed=((0.0, -0.2, -0.4), "higher", 0.02))  # reversed, but not a metric of the hypothesis
    assert found["dsr_fixed"].reading == REVERSED
    reading = read_hypothesis(found, *MOVED)
    assert reading.outcome == SUPPORTED and "dsr_adaptive" in reading.reasons[0]


def test_a_reversed_capability_trend_counts_against_even_when_a_safety_trend_holds():
    found = trends(dsr_adaptive=((0.0, 0.2, 0.4), "higher", 0.02), sycophancy=((0.0, 0.0, 0.0), "lower", 0.3),
                   awareness=((0.1, 0.1, 0.1), "higher", 0.3), **{"cap:facts": ((0.0, -0.2, -0.4), "higher", 0.02)})
    reading = read_hypothesis(found, *MOVED)
    assert reading.outcome == AGAINST and any(r.startswith("cap:facts") for r in reading.reasons)


def test_a_constant_advantage_is_against_and_said_so():
    found = trends(dsr_adaptive=((0.3, 0.3, 0.3), "higher", 0.02), sycophancy=((0.0, 0.0, 0.0), "lower", 0.3),
                   awareness=((0.0, 0.0, 0.0), "higher", 0.3))
    assert found["dsr_adaptive"].ahead_everywhere and found["dsr_adaptive"].reading_bonferroni == NOT_RESOLVED
    reading = read_hypothesis(found, *MOVED)
    assert reading.outcome == AGAINST
    assert any("no safety metric" in r for r in reading.reasons)
    assert any(r.startswith("dsr_adaptive") and "constant advantage" in r for r in reading.reasons)


def test_a_still_dose_is_reported_instead_of_reading_the_trend():
    found = trends(dsr_adaptive=((0.0, 0.2, 0.4), "higher", 0.02))
    still = read_hypothesis(found, Dose(-1.0, -1.5, -0.5), Dose(-1.2, -1.4, -1.0))
    assert still.outcome == DOSE_STILL and "-1.200" in still.reasons[0]
    assert not dose_moves(Dose(-1.0, -1.5, -0.5), Dose(-1.2, -1.4, -1.0))
    assert dose_moves(*MOVED)
    assert read_hypothesis(found, None, MOVED[1]).outcome == NOT_READ


def test_a_missing_safety_metric_leaves_the_hypothesis_unread():
    found = trends(dsr_adaptive=((0.0, 0.0, 0.0), "higher", 0.3))
    assert read_hypothesis(found, *MOVED).outcome == NOT_READ


def profile(own: tuple[float, float, float], target: tuple[float, float, float], half: float = 0.196):
    axes = ("sycophancy", "jailbreak", "awareness")
    return {"axes": {a: {"measures": {"own_seq_logprob": {"value": o, "ci_low": o - half, "ci_high": o + half},
                                      "target_seq_logprob": {"value": t, "ci_low": t - half, "ci_high": t + half}}}
                     for a, o, t in zip(axes, own, target, strict=True)}}


def test_the_primary_dose_is_the_mean_over_families_of_the_mean_over_axes_of_own_minus_target():
    dose = primary_dose({"llama": profile((-1.0, -2.0, -3.0), (-4.0, -5.0, -9.0)),
                         "qwen3": profile((-1.0, -1.0, -1.0), (-2.0, -2.0, -2.0))})
    assert dose.per_family == pytest.approx({"llama": 4.0, "qwen3": 1.0})
    assert dose.value == pytest.approx(2.5)
    # each mean's sd is 0.1; 12 independent terms averaged over 3 axes × 2 families: se = sqrt(12·0.01)/6
    assert dose.ci_high - dose.value == pytest.approx(1.96 * math.sqrt(0.12) / 6)
    broken = profile((-1.0, -2.0, -3.0), (-4.0, -5.0, -9.0))
    del broken["axes"]["awareness"]
    with pytest.raises(ValueError, match="awareness"):
        primary_dose({"llama": broken})


def test_the_pooled_difference_keeps_the_resamples_its_interval_is_read_from():
    a = {u: [1.0] * 3 if u % 2 else [0.0, 1.0, 0.0] for u in range(20)}
    b = {u: [0.0, 1.0, 0.0] for u in range(20)}
    pooled = pooled_paired_difference({("f", 0): (a, b), ("f", 1): (b, a)}, n_resamples=500, seed=3)
    assert pooled.draws.shape == (500,)
    assert pooled.estimate.ci_low == pytest.approx(np.quantile(pooled.draws, 0.025))
    assert pooled.estimate.ci_high == pytest.approx(np.quantile(pooled.draws, 0.975))
