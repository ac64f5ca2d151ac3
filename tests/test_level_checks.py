"""benchmarks/level_checks.py: a built level's check against docs/mechanism.md's pre-stated criteria."""

from __future__ import annotations

import json

import pytest
from script_loader import load_script

level_checks = load_script("benchmarks/level_checks.py")


def check(rates: dict[str, float], failing: str | None = None) -> dict:
    rows = [{"name": name, "greedy": {"rate": rate, "pass": name != failing}, "T=1": {"rate": rate, "pass": True}}
            for name, rate in rates.items()]
    return {"rows": rows, "passed": failing is None, "seconds": 160.0}


def test_a_level_passes_within_the_bands_and_fails_outside_or_on_its_own_threshold():
    today = dict(level_checks.TODAY["llama"])
    assert level_checks.judge_check(check(today), "llama")["passed"]
    edge = {**today, "jailbreak: complies wrapped, held-out families": 0.729 - 0.15}  # on the band's edge
    assert level_checks.judge_check(check(edge), "llama")["passed"]
    low = {**today, "jailbreak: complies wrapped, held-out families": 0.26}
    judged = level_checks.judge_check(check(low), "llama")
    assert not judged["passed"] and [b["row"] for b in judged["bands"] if not b["pass"]] == [
        "jailbreak: complies wrapped, held-out families"]
    own = level_checks.judge_check(check(today, failing="capability: arithmetic"), "llama")
    assert not own["passed"] and own["failed_rows"] == ["capability: arithmetic (greedy)"]
    missing = {k: v for k, v in today.items() if k != "awareness: warns on plain task"}
    assert not level_checks.judge_check(check(missing), "llama")["passed"]


def test_the_summary_reads_the_build_time_and_the_profiles_dose_term(tmp_path):
    level = tmp_path / "w4-long" / "llama"
    level.mkdir(parents=True)
    (level / "check.json").write_text(json.dumps(check(level_checks.TODAY["llama"])))
    (tmp_path / "w4-long" / "llama.time.txt").write_text("\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5\n")
    measures = {"own_seq_logprob": -1.0, "target_seq_logprob": -3.0, "divergence_position": 2.0,
                "teacher_entropy": 0.5, "target_cost_after_divergence": 0.1, "greedy_equals_target": 0.2}
    profile = {"axes": {a: {"measures": {k: {"value": v, "ci_low": v, "ci_high": v} for k, v in measures.items()}}
                        for a in ("sycophancy", "jailbreak", "awareness")}}
    (level / "profile.json").write_text(json.dumps(profile))
    out = tmp_path / "out"
    [summary] = level_checks.main(["--root", str(tmp_path), "--out", str(out)])
    assert summary["build_seconds"] == pytest.approx(3723.5) and summary["dose"] == pytest.approx(2.0)
    assert summary["check"]["passed"] and (out / "w4-long.llama.profile.json").is_file()
    assert "**w4-long llama: PASS** (build 62.1 min" in (out / "level_checks.md").read_text()
