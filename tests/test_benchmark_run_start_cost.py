"""benchmarks/run_start_cost.py: the run-start profile's share of a run's first steps, from the run's own files."""

from __future__ import annotations

import json

import pytest
from script_loader import load_script

from opct.runs.layout import RunLayout

run_start_cost = load_script("benchmarks/run_start_cost.py")


def _run(root, profile, step_times):
    layout = RunLayout(root)
    root.mkdir(parents=True)
    config = {"method": "opct", "model": {"name_or_path": "organism"}, "train": {"pairs_per_step": 16},
              "opct": {"sampling": {"n": 3, "max_new_tokens": 48}}}
    layout.manifest.write_text(json.dumps({"config": config, "off_policy_profile": profile}))
    layout.metrics.write_text("".join(json.dumps({"step": i + 1, "step_time_s": t}) + "\n" for i, t in enumerate(step_times)))
    return root


def test_the_share_is_the_profile_over_the_first_steps_only(tmp_path):
    run = _run(tmp_path / "r", {"pairs_per_axis": 8, "seconds": 3.0, "axes": {"b": {}, "a": {}}}, [1.0, 2.0, 100.0])
    cost = run_start_cost.run_cost(run, steps=2)
    assert cost["steps_seconds"] == 3.0 and cost["profile_share_of_steps"] == 1.0
    assert cost["samples_per_pair"] == 3 and cost["profile_axes"] == ["a", "b"]
    out = tmp_path / "cost.json"
    assert run_start_cost.main([str(run), "--steps", "3", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["runs"][0]["profile_share_of_steps"] == round(3.0 / 103.0, 4)


def test_a_run_without_a_profile_or_enough_steps_is_refused(tmp_path):
    skipped = _run(tmp_path / "s", {"skipped": "profile.pairs_per_axis is 0"}, [1.0])
    with pytest.raises(SystemExit, match="profile.pairs_per_axis is 0"):
        run_start_cost.run_cost(skipped, steps=1)
    short = _run(tmp_path / "t", {"pairs_per_axis": 8, "seconds": 1.0}, [1.0])
    with pytest.raises(SystemExit, match="fewer than --steps 2"):
        run_start_cost.run_cost(short, steps=2)
