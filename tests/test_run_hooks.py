"""Run-start hooks (opct/training/run_hooks.py): a registered hook runs once per run, after the built-in
off-policy profile and before step 1, with the run's context; a resumed run calls its ``resume`` instead."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import run_config
from run_helpers import adapter, assert_same_weights, train_reference, write_pairs

from opct.config import RunConfig
from opct.runs.layout import RunLayout
from opct.training.loop import train
from opct.training.run_hooks import RUN_START_HOOKS, RunStart, RunStartHook, registered_hooks


class ToyHook:
    """Records what it saw each time it was called."""

    def __init__(self) -> None:
        self.starts: list[dict[str, Any]] = []
        self.resumes: list[int] = []

    def start(self, start: RunStart) -> dict[str, Any]:
        layout = RunLayout(start.run_dir)
        lora_b = [p for n, p in start.ctx.policy.named_parameters() if "lora_B" in n]
        self.starts.append({
            "run_dir": start.run_dir, "name": start.cfg.name, "pairs": [p.id for p in start.pairs],
            "main": start.is_main_process, "rank": start.process_index,
            "untrained": bool(lora_b) and all(float(p.detach().abs().max()) == 0.0 for p in lora_b),  # LoRA's B starts at 0
            "steps_logged": layout.metrics.exists() and layout.metrics.read_text().strip() != "",
            "checkpoints": layout.list_checkpoints(),
            "profile_written": layout.diagnostics.exists(),
        })
        return {"pairs_seen": len(start.pairs)}

    def resume(self, start: RunStart) -> dict[str, Any]:
        self.resumes.append(len(start.pairs))
        return {"pairs_seen": len(start.pairs), "resumed": True}


@pytest.fixture
def toy() -> Iterator[ToyHook]:
    hook = ToyHook()
    RUN_START_HOOKS.register("toy", RunStartHook(start=hook.start, resume=hook.resume, record_as="toy_record"))
    try:
        yield hook
    finally:
        RUN_START_HOOKS.unregister("toy")


def _manifest(run_dir) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text())


def test_the_profile_is_the_first_registered_hook_and_a_user_hook_follows():
    names = [name for name, _ in registered_hooks()]
    assert names[0] == "off_policy_profile"
    RUN_START_HOOKS.register("late", lambda start: None)
    try:
        assert [name for name, _ in registered_hooks()][-1] == "late"
        assert dict(registered_hooks())["late"].resume is None  # a plain function runs at the start only
    finally:
        RUN_START_HOOKS.unregister("late")


def test_a_registered_hook_runs_once_before_step_1_with_the_run(toy, tiny_model, tmp_path):
    trained = train_reference(tiny_model, tmp_path / "ref", **{"profile.pairs_per_axis": 2})
    assert len(toy.starts) == 1 and toy.resumes == []
    seen = toy.starts[0]
    assert seen["run_dir"] == trained.run_dir and seen["name"] == "t"
    assert seen["pairs"] == [f"p{i}" for i in range(16)] and seen["main"] and seen["rank"] == 0
    assert seen["untrained"] and not seen["steps_logged"] and seen["checkpoints"] == []  # before step 1
    assert seen["profile_written"]  # after the built-in profile, registered first
    manifest = _manifest(trained.run_dir)
    assert manifest["toy_record"] == {"pairs_seen": 16}
    assert manifest["off_policy_profile"]["pairs_per_axis"] == 2
    assert len(RunLayout(trained.run_dir).metrics.read_text().splitlines()) == 4  # and the run then trained


def test_a_resumed_run_calls_resume_not_start_and_trains_the_same(toy, tiny_model, tmp_path):
    trained = train_reference(tiny_model, tmp_path / "ref")
    cfg = trained.copy(tmp_path / "resumed", after_step=2)
    train(cfg, show_progress=False)
    assert len(toy.starts) == 1 and toy.resumes == [16]
    assert _manifest(cfg.run_dir)["toy_record"] == {"pairs_seen": 16, "resumed": True}
    assert_same_weights(adapter(cfg.run_dir), trained.reference)


def test_a_hook_without_a_record_leaves_the_manifest_and_the_weights_as_they_were(tiny_model, tmp_path):
    plain = train_reference(tiny_model, tmp_path / "plain")
    calls: list[RunStart] = []
    RUN_START_HOOKS.register("counter", calls.append)
    try:
        cfg = RunConfig.model_validate(run_config(tiny_model, write_pairs(tmp_path / "pairs.jsonl"), tmp_path / "hooked",
                                                  **plain.overrides))
        train(cfg, show_progress=False)
    finally:
        RUN_START_HOOKS.unregister("counter")
    assert len(calls) == 1
    assert set(_manifest(cfg.run_dir)) == set(_manifest(plain.run_dir))
    assert_same_weights(adapter(cfg.run_dir), plain.reference)
