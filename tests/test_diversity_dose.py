"""The dose that can move with diversity (issue 59, item 3; added after the study, not pre-registered): the
greedy target's percentile among the student's own samples and its cost after the decision token, by hand."""

from __future__ import annotations

import math

import pytest

from opct.diagnostics.offpolicy import (
    DIVERSITY_DOSE,
    MEASURES,
    PairProfile,
    cost_after_decision,
    diversity_dose_summary,
    nll_after_decision,
    summarize,
    table_rows,
    target_percentile,
)


def test_the_percentile_counts_samples_below_and_half_the_ties() -> None:
    assert target_percentile(-1.0, [-2.0, -0.5, -1.0, -3.0]) == pytest.approx(100 * (2 + 0.5) / 4)  # 62.5
    assert target_percentile(0.0, [-1.0, -2.0]) == 100.0  # likelier than every sample
    assert target_percentile(-9.0, [-1.0, -2.0, -3.0]) == 0.0  # less likely than every one
    assert target_percentile(-1.0, [-1.0]) == 50.0
    assert target_percentile(-1.0, []) is None


def test_the_cost_after_the_decision_token() -> None:
    lps = [-0.1, math.log(0.2), -1.0, -0.5]
    assert nll_after_decision(lps, 1) == [1.0, 0.5]
    assert cost_after_decision(lps, 1) == pytest.approx(0.75)
    assert cost_after_decision(lps, 0) == pytest.approx((-math.log(0.2) + 1.0 + 0.5) / 3)
    assert cost_after_decision(lps, 3) is None  # the decision token is the last: nothing after it
    assert cost_after_decision(lps, None) is None and nll_after_decision(lps, None) == []


def _pair(pid, target, answer, lps, samples, *, cut=False, sample_cut=None):
    return PairProfile(pid, "a", pid, list(target), cut, list(answer), False, list(lps), [0.5] * len(target),
                       None, None, [list(s) for s in samples], list(sample_cut or [False] * len(samples)))


def _profiles() -> list[PairProfile]:
    return [
        # target −0.3; samples −0.3 (a tie) and −1.0 (below): 75; no decision token
        _pair("equal", [5, 6, 7], [5, 6, 7], [-0.1, -0.1, -0.1], [(-0.1, -0.2), (-0.5, -0.5)]),
        # target −0.1 + log 0.2 − 1.0 = −2.709; samples −3.0 (below) and −0.2 (above); a cut sample left out: 50
        _pair("d1", [5, 8, 9], [5, 6, 7], [-0.1, math.log(0.2), -1.0], [(-3.0,), (-0.2,), (-9.0,)],
              sample_cut=[False, False, True]),
        # target log 0.5 − 0.7 = −1.393; sample −0.3 above it: 0
        _pair("d0", [4, 9], [5], [math.log(0.5), -0.7], [(-0.3,)]),
        # the target cut off at the token limit: no percentile (its sequence is unknown), still a cost after d = 0
        _pair("cut", [3, 3], [5, 5], [math.log(0.1), -5.0], [(-0.3,)], cut=True),
    ]


def test_the_aggregate_and_the_per_pair_records_by_hand() -> None:
    profile = summarize(_profiles(), per_pair=True)
    measures = profile["axes"]["a"]["measures"]
    assert set(DIVERSITY_DOSE) <= set(MEASURES) <= set(measures)
    percentile = measures["target_percentile_among_own"]
    assert percentile["value"] == pytest.approx((75 + 50 + 0) / 3) and percentile["n"] == 3
    assert measures["target_cost_after_divergence"]["value"] == pytest.approx((1.0 + 0.7 + 5.0) / 3)  # token-weighted
    records = {r["pair_id"]: r for r in profile["per_pair"]}
    assert records["equal"]["target_percentile_among_own"] == 75.0 and records["equal"]["decision_token"] is None
    assert records["equal"]["target_cost_after_divergence"] is None
    assert records["d1"]["own_seq_logprobs"] == [-3.0, -0.2] and records["d1"]["target_percentile_among_own"] == 50.0
    assert records["d1"]["target_cost_after_divergence"] == pytest.approx(1.0)
    assert records["d0"]["target_percentile_among_own"] == 0.0 and records["d0"]["target_cost_after_divergence"] == pytest.approx(0.7)
    assert records["cut"]["target_seq_logprob"] is None and records["cut"]["target_percentile_among_own"] is None
    assert records["cut"]["target_cost_after_divergence"] == pytest.approx(5.0)
    assert "per_pair" not in summarize(_profiles())  # the run-start profile keeps its aggregate form

    line = diversity_dose_summary(profile)
    assert "not pre-registered" in line and f"a {(75 + 50) / 3:.1f} / {(1.0 + 0.7 + 5.0) / 3:.3f}" in line


def test_a_profile_measured_before_the_percentile_shows_no_row_for_it() -> None:
    profile = summarize(_profiles())
    del profile["axes"]["a"]["measures"]["target_percentile_among_own"]
    _, rows = table_rows(profile)
    labels = [r[0] for r in rows]
    assert MEASURES["target_percentile_among_own"] not in labels and MEASURES["target_cost_after_divergence"] in labels
    assert "a — / " in diversity_dose_summary(profile)
