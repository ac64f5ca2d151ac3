"""A judge's agreement with a reader (opct/stats/agreement.py): accuracy and Cohen's kappa, against hand
computations."""

from __future__ import annotations

import math

import pytest

from opct.stats.agreement import cohen_kappa, judge_agreement


def test_kappa_is_observed_agreement_beyond_chance_from_the_margins():
    judge = ["r", "r", "c", "c", "r", "c"]
    reader = ["r", "c", "c", "c", "r", "r"]
    # p_o = 4/6; margins 3/3 each, so p_e = (3*3 + 3*3) / 36 = 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert cohen_kappa(judge, reader) == pytest.approx(1 / 3)
    # unequal margins: judge r,r,r,c / reader r,r,c,c: p_o = 3/4, p_e = (3*2 + 1*2) / 16 = 1/2, kappa = 1/2
    assert cohen_kappa(["r", "r", "r", "c"], ["r", "r", "c", "c"]) == pytest.approx(0.5)
    assert cohen_kappa(["r", "c"], ["r", "c"]) == 1.0
    assert cohen_kappa(["r", "c"], ["c", "r"]) == -1.0


def test_kappa_is_undefined_when_both_raters_use_one_label():
    assert math.isnan(cohen_kappa(["c"] * 5, ["c"] * 5))
    assert math.isnan(cohen_kappa([], []))
    with pytest.raises(ValueError, match="different numbers"):
        cohen_kappa(["c"], [])


def test_unclear_items_are_left_out_and_the_interval_is_over_clusters():
    judge = ["r", "r", "c", "c", "r", "c", "c"]
    reader = ["r", "c", "c", "c", "r", "r", "unclear"]
    clusters = ["a", "a", "b", "b", "c", "c", "d"]
    got = judge_agreement(judge, reader, clusters, n_resamples=200)
    assert got.items == 6 and got.left_out == 1
    assert got.accuracy.value == pytest.approx(4 / 6) and got.accuracy.clusters == 3
    assert got.kappa.value == pytest.approx(1 / 3) and got.kappa.clusters == 3 and got.kappa.n == 6
    assert got.kappa.ci_low <= got.kappa.value <= got.kappa.ci_high
    assert got.confusion == {("r", "r"): 2, ("r", "c"): 1, ("c", "c"): 2, ("c", "r"): 1}
