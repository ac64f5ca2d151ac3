"""The off-policy profile of a training run's start (a run-start hook, off unless ``profile.pairs_per_axis`` is
set): in ``diagnostics.json`` and the manifest, kept by a resumed run, and changing nothing that is trained."""

from __future__ import annotations

import json

from run_helpers import adapter, assert_same_weights, train_reference

from opct.training.loop import train


def _manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


def test_a_run_records_its_start_profile_and_a_resumed_run_keeps_it(tiny_model, tmp_path):
    trained = train_reference(tiny_model, tmp_path / "ref", **{"profile.pairs_per_axis": 5})
    profile = _manifest(trained.run_dir)["off_policy_profile"]
    assert profile == json.loads((trained.run_dir / "diagnostics.json").read_text())
    assert profile["pairs_per_axis"] == 5 and profile["max_new_tokens"] == 8  # opct.sampling.max_new_tokens
    axis = profile["axes"]["sycophancy"]
    assert axis["pairs"] == 5 and axis["samples"] == 5 and profile["seconds"] >= 0
    assert axis["measures"]["teacher_entropy"]["n"] > 0
    cfg = trained.copy(tmp_path / "resumed", after_step=2)
    (cfg.run_dir / "diagnostics.json").write_text(json.dumps({**profile, "marker": 1}))  # read back, not measured anew
    train(cfg, show_progress=False)
    assert _manifest(cfg.run_dir)["off_policy_profile"]["marker"] == 1
    assert_same_weights(adapter(cfg.run_dir), trained.reference)


def test_the_profile_is_off_by_default_and_changes_nothing_trained(tiny_model, tmp_path):
    measured = train_reference(tiny_model, tmp_path / "measured", **{"method": "bct", "profile.pairs_per_axis": 8})
    skipped = train_reference(tiny_model, tmp_path / "skipped", **{"method": "bct"})
    assert _manifest(skipped.run_dir)["off_policy_profile"] == {"skipped": "profile.pairs_per_axis is 0"}
    assert _manifest(measured.run_dir)["off_policy_profile"]["max_new_tokens"] == 8  # bct.targets.max_new_tokens
    assert_same_weights(measured.reference, skipped.reference)


def test_pairs_without_a_cue_are_not_profiled(tiny_model, tmp_path):
    """The GRPO attacker's pairs repeat the prompt as teacher_prompt: there is no target to profile."""
    from conftest import make_pairs, run_config

    from opct.config import RunConfig

    rows = [{**r, "teacher_prompt": r["prompt"]} for r in make_pairs()]
    pairs = tmp_path / "same.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = RunConfig.model_validate(run_config(tiny_model, pairs, tmp_path / "out",
                                              **{"train.max_steps": 1, "profile.pairs_per_axis": 8}))
    train(cfg, show_progress=False)
    assert _manifest(cfg.run_dir)["off_policy_profile"]["skipped"].startswith("every pair's teacher_prompt")


def test_a_run_recorded_at_the_old_default_resumes_at_the_new_one(tiny_model, tmp_path):
    """Runs trained before the profile's default went from 8 to 0 recorded 8: resumed at 0, they continue (the
    profile trains nothing) and keep the profile their start measured."""
    trained = train_reference(tiny_model, tmp_path / "ref", **{"profile.pairs_per_axis": 8})
    cfg = trained.copy(tmp_path / "resumed", after_step=2, **{"profile.pairs_per_axis": 0})
    train(cfg, show_progress=False)
    assert _manifest(cfg.run_dir)["off_policy_profile"]["pairs_per_axis"] == 8
    assert_same_weights(adapter(cfg.run_dir), trained.reference)
