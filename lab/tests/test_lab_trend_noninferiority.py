"""The pre-registered dose-response slope reads a capability column against 0 on the "higher" side (a slope has no
non-inferiority margin), and still names the claim it is about (issue 59, item 5)."""

from __future__ import annotations

import numpy as np

from opct.report.pooled import NO_WORSE
from opct.stats.estimate import Estimate
from opct.stats.paired import PooledDifference
from opct_lab.report.trend import LevelPoint, trend


def _level(value: float, half_width: float, seed: int) -> PooledDifference:
    draws = np.random.default_rng(seed).normal(value, half_width / 1.96, 400)
    return PooledDifference(Estimate(value, value - half_width, value + half_width, 100, "bootstrap", clusters=10),
                            cells=3, draws=draws)


def test_the_dose_response_slope_of_a_capability_column_keeps_its_pre_registered_reading() -> None:
    """A slope has no margin: the pre-registered analysis reads capability's β against 0 on the "higher" side,
    and the trend still says which claim it is about."""
    points = [LevelPoint(f"L{i}", dose, _level(d, 0.01, i)) for i, (dose, d) in enumerate([(0.0, -0.1), (1.0, -0.3), (2.0, -0.5)])]
    as_no_worse, as_higher = trend(points, NO_WORSE), trend(points, "higher")
    assert as_no_worse.direction == NO_WORSE and as_higher.direction == "higher"
    assert (as_no_worse.beta, as_no_worse.ci, as_no_worse.reading, as_no_worse.reading_bonferroni) == (
        as_higher.beta, as_higher.ci, as_higher.reading, as_higher.reading_bonferroni)
    assert as_no_worse.reading == "reversed"
