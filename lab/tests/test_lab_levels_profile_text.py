"""The mechanism report shows the dose that can move with diversity per level and family (issue 59, item 3;
added after the study, not pre-registered)."""

from __future__ import annotations

from opct_lab.report.levels import _profile_text


def test_the_mechanism_report_shows_both_per_level_and_family() -> None:
    shown = {axis: {"own_seq_logprob": -2.0, "target_seq_logprob": -1.0, "divergence_position": 1.0,
                    "teacher_entropy": 0.1, "target_cost_after_divergence": 0.25, "target_percentile_among_own": 87.5}
             for axis in ("sycophancy", "jailbreak", "awareness")}
    text = _profile_text("llama", shown)
    assert "target cost after the decision 0.25/0.25/0.25" in text
    assert "target percentile among own samples (added after the study) 87.5/87.5/87.5" in text
    del shown["jailbreak"]["target_percentile_among_own"]
    assert "(added after the study) 87.5/—/87.5" in _profile_text("llama", shown)
