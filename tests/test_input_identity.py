"""One identity-of-inputs rule (issue 39, item 5): resume, an experiment's retraining and the eval runner
judge the same change of a setting the same way, and a setting given at its default is the same input as
one omitted (or recorded before it existed). No model is loaded: the runs are manifests, the evals a state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opct.axes.capability.tasks import multiple_choice_task
from opct.config import RunConfig, dump_config
from opct.evals.identity import stale_reason, task_identity
from opct.experiments.invalidation import retrain_reason, run_complete
from opct.runs.errors import RunDirError
from opct.runs.identity import input_changes, run_setting_changes
from opct.runs.resume import check_resumable
from opct.sampling.engine import SamplingParams

STEPS = 2


def _run(tmp_path: Path, **sections) -> RunConfig:
    """A run of ``STEPS`` steps in ``tmp_path/r`` (the other settings at their defaults, or ``sections``);
    ``data.too_long: drop`` so that retraining compares settings only (the pairs' hash needs real pairs)."""
    train = {"max_steps": STEPS, **sections.pop("train", {})}
    return RunConfig.model_validate({"output_dir": str(tmp_path), "name": "r", "train": train,
                                     "data": {"too_long": "drop"}, **sections})


def _record_run(cfg: RunConfig, config: dict | None = None) -> None:
    """A finished run's manifest and checkpoint, as training writes them (``config`` as recorded)."""
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    (cfg.run_dir / "manifest.json").write_text(json.dumps(
        {"config": config if config is not None else dump_config(cfg), "num_pairs": 4, "teacher_fingerprint": "t",
         "data_hash": "d", "total_steps": STEPS}))
    (cfg.run_dir / "checkpoints" / f"step-{STEPS}").mkdir(parents=True)


def _resume_changes(recorded: RunConfig, now: RunConfig) -> str | None:
    """What resume says about continuing ``recorded`` with ``now`` (None: it resumes)."""
    try:
        check_resumable(recorded.run_dir, now, "t", "d", done=1, steps=STEPS)
    except RunDirError as err:
        return str(err)
    return None


def _eval_state(tmp_path: Path, params: SamplingParams) -> tuple[Path, object]:
    """An eval folder holding one record measured with ``params``; returns it and its task."""
    from opct.datasets.base import EvalItem

    task = multiple_choice_task("mc", [EvalItem(id="q", prompt=[{"role": "user", "content": "(A) x (B) y"}],
                                                meta={"answer": "A", "letters": "AB"})])
    folder = tmp_path / "eval" / "mc"
    folder.mkdir(parents=True)
    (folder / "samples.jsonl").write_text(json.dumps({"item_id": "q"}) + "\n")
    identity = task_identity(task, params, "m", {"weights_sha256": "w"})
    (folder / "state.json").write_text(json.dumps(identity))
    return folder, task


def test_a_changed_setting_is_named_alike_by_resume_retraining_and_the_eval_runner(tmp_path):
    recorded = _run(tmp_path, optim={"lr": 1e-4})
    _record_run(recorded)
    changed = _run(tmp_path, optim={"lr": 2e-4})
    assert run_setting_changes(dump_config(recorded), changed) == ["optim.lr"]
    assert "optim.lr" in (_resume_changes(recorded, changed) or "")
    assert retrain_reason(changed) == "its settings changed: optim.lr"
    assert not run_complete(changed)
    # the eval runner reads its inputs through the same rule: the one generation setting that changed, by name
    folder, task = _eval_state(tmp_path, SamplingParams(n=1, temperature=1.0, max_new_tokens=4, seed=0))
    other = task_identity(task, SamplingParams(n=1, temperature=0.5, max_new_tokens=4, seed=0), "m", {"weights_sha256": "w"})
    assert stale_reason(folder, other) == f"{folder / 'samples.jsonl'} holds records measured with other generation_config.temperature"


def test_a_setting_resume_accepts_is_no_change_for_retraining_either(tmp_path):
    recorded = _run(tmp_path)
    _record_run(recorded)
    moved = _run(tmp_path, threads=3, train={"checkpoint_every": 1})
    assert _resume_changes(recorded, moved) is None
    assert retrain_reason(moved) is None
    assert run_setting_changes(dump_config(recorded), moved) == ["threads", "train.checkpoint_every"]


@pytest.mark.parametrize("explicit", [False, True])
def test_a_setting_at_its_default_is_the_same_input_given_or_omitted(tmp_path, explicit):
    """A manifest written before ``train.merged_lora_sampling`` existed is current for a run that leaves it
    at its default, whether the setting is omitted or given explicitly; another value is a change for all."""
    now = _run(tmp_path, train={"merged_lora_sampling": "auto"} if explicit else {})
    old = dump_config(now)
    del old["train"]["merged_lora_sampling"], old["threads"]  # as an earlier opct wrote it
    _record_run(now, old)
    assert _resume_changes(now, now) is None and retrain_reason(now) is None and run_complete(now)
    other = _run(tmp_path, train={"merged_lora_sampling": True})
    assert "train.merged_lora_sampling" in (_resume_changes(now, other) or "")
    assert retrain_reason(other) == "its settings changed: train.merged_lora_sampling"
    assert not run_complete(other)


def test_an_eval_generation_setting_at_its_default_is_the_same_input_given_or_omitted(tmp_path):
    """``min_new_tokens`` is recorded only when set: a record without it was measured at 0."""
    folder, task = _eval_state(tmp_path, SamplingParams(n=1, temperature=1.0, max_new_tokens=4, seed=0))
    assert "min_new_tokens" not in json.loads((folder / "state.json").read_text())["generation_config"]
    explicit = task_identity(task, SamplingParams(n=1, temperature=1.0, max_new_tokens=4, seed=0), "m", {"weights_sha256": "w"})
    explicit["generation_config"]["min_new_tokens"] = 0
    assert stale_reason(folder, explicit) is None
    explicit["generation_config"]["min_new_tokens"] = 2
    assert "generation_config.min_new_tokens" in (stale_reason(folder, explicit) or "")


def test_input_changes_fills_either_side_and_ignores_what_never_makes_another_result():
    defaults = {"a.b": 1, "c": "x"}
    assert input_changes({"a": {"b": 1}}, {"c": "x"}, defaults=defaults) == []
    assert input_changes({"a": {"b": 2}}, {}, defaults=defaults) == ["a.b"]
    assert input_changes({"a": {}, "d": 1}, {"d": 2}, ignore={"d"}) == []
    assert input_changes({"model": "p", "w": 1}, {"model": "q", "w": 1}) == ["model"]


def test_a_run_recorded_at_the_old_default_of_merged_lora_sampling_is_current_under_the_new_one(tmp_path):
    """``train.merged_lora_sampling`` was ``false`` by default and is ``auto`` now (the same rollouts on a CPU):
    a manifest that recorded ``false`` is current for a run left at ``auto``, not for one set to ``true``."""
    now = _run(tmp_path)
    assert now.train.merged_lora_sampling == "auto"
    old = dump_config(now)
    old["train"]["merged_lora_sampling"] = False  # as opct wrote it before issue 57
    _record_run(now, old)
    assert _resume_changes(now, now) is None and retrain_reason(now) is None and run_complete(now)
    merged = _run(tmp_path, train={"merged_lora_sampling": True})
    assert retrain_reason(merged) == "its settings changed: train.merged_lora_sampling"
    assert _resume_changes(now, _run(tmp_path, train={"merged_lora_sampling": False})) is None  # recorded false, run false
