"""A run whose own samples degenerated while it trained is said in its report, and only such a run."""

from __future__ import annotations

import pytest
from report_fixtures import write

from opct.report.load import load_experiment
from opct.report.notices import warning_groups
from opct.report.rollout_health import rollout_collapse


def steps(n: int, entropy, cut=lambda s: 0.0, kl=lambda s: 0.01) -> list[dict]:
    """``n`` OPCT steps whose entropy, cut-off share and teacher-KL follow the given functions of the step."""
    return [{"step": s, "loss": 0.1, "entropy": entropy(s), "truncation_rate": cut(s), "kl_to_teacher": kl(s)}
            for s in range(1, n + 1)]


def test_a_stable_run_and_a_run_without_rollouts_are_not_flagged():
    assert rollout_collapse(steps(60, lambda s: 0.3 - 0.002 * s)) is None  # entropy falls as it learns
    assert rollout_collapse(steps(60, lambda s: 0.2 + 0.01 * s)) is None  # 0.3 -> 0.8: tripled, but by < 1 nat
    # BCT: fixed targets; its entropy and cut-off share are its targets', however they look
    bct = [{"step": s, "loss": 0.5, "entropy": 0.3 if s < 20 else 4.0, "truncation_rate": 0.9} for s in range(1, 41)]
    assert rollout_collapse(bct) is None
    assert rollout_collapse(steps(1, lambda s: 9.0)) is None  # one step: nothing to compare
    assert rollout_collapse(steps(20, lambda s: float("nan"))) is None


def test_a_collapse_is_measured_from_the_first_and_last_steps():
    # the L4 runs of the study: entropy 0.3 until step 100, then about 5 nats, most rollouts cut at the end
    run = steps(180, lambda s: 0.3 if s < 100 else 5.0, cut=lambda s: 0.0 if s < 100 else 0.7,
                kl=lambda s: 0.01 if s < 100 else 3.8)
    collapse = rollout_collapse(run)
    assert collapse is not None
    assert collapse.window == 10 and collapse.from_step == 100
    assert collapse.entropy == pytest.approx((0.3, 5.0)) and collapse.teacher_kl == pytest.approx((0.01, 3.8))
    assert collapse.cut_share == pytest.approx(0.7)
    text = collapse.sentence()
    assert "rollout entropy 0.30 → 5.00 nats per token, their teacher-KL 0.010 → 3.800, 70% of the rollouts cut" in text
    assert "from step 100" in text and "decode greedily" in text


def test_most_rollouts_cut_at_the_limit_flag_a_run_whose_entropy_did_not_rise():
    collapse = rollout_collapse(steps(40, lambda s: 0.3, cut=lambda s: 0.6 if s > 30 else 0.0))
    assert collapse is not None and collapse.cut_share == pytest.approx(0.6) and collapse.from_step is None
    assert rollout_collapse(steps(40, lambda s: 0.3, cut=lambda s: 0.4 if s > 30 else 0.0)) is None


def test_the_report_warns_under_the_collapsed_run_only(tmp_path):
    root = tmp_path / "exp"
    write(root / "plan.json", {"name": "exp", "model": "organism", "methods": ["base", "bct", "opct"]})
    write(root / "train" / "bct" / "metrics.jsonl", [{"step": s, "loss": 0.5, "entropy": 0.3} for s in range(1, 41)])
    write(root / "train" / "opct" / "metrics.jsonl", steps(40, lambda s: 0.3 if s <= 20 else 4.0))
    groups = dict(warning_groups(load_experiment(root)))
    assert set(groups) == {"OPCT"}
    [line] = groups["OPCT"]
    assert line.startswith("training: its own samples degenerated while it trained: rollout entropy 0.30 → 4.00")
