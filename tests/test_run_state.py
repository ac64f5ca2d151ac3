"""What a rerun may do to a run directory: finished runs stay as they are, one training at a time, and a
run that never checkpointed can start over with a corrected configuration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import yaml
from conftest import run_config
from run_helpers import Trained, adapter, assert_same_weights, metrics, train_reference

from opct.training.loop import RunDirError, train


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory) -> Trained:
    return train_reference(tiny_model, tmp_path_factory.mktemp("trained"))


def _snapshot(run_dir) -> tuple[bytes, bytes, bytes]:
    return ((run_dir / "manifest.json").read_bytes(), (run_dir / "metrics.jsonl").read_bytes(),
            (run_dir / "final" / "adapter_model.safetensors").read_bytes())


def test_a_finished_run_refuses_fewer_steps_and_keeps_its_manifest_and_weights(trained, tmp_path):
    cfg = trained.copy(tmp_path)
    before = _snapshot(cfg.run_dir)
    with pytest.raises(RunDirError, match=r"train\.max_steps") as err:
        train(trained.config(tmp_path, **{"train.max_steps": 2}), show_progress=False)
    assert "4 steps" in str(err.value)
    assert _snapshot(cfg.run_dir) == before


@pytest.mark.parametrize(("key", "value"), [("train.checkpoint_every", 2), ("train.log_rollouts", False)])
def test_a_finished_run_refuses_any_changed_setting_naming_it(trained, tmp_path, key, value):
    cfg = trained.copy(tmp_path)
    before = _snapshot(cfg.run_dir)
    with pytest.raises(RunDirError, match=key.replace(".", r"\.")):
        train(trained.config(tmp_path, **{key: value}), show_progress=False)
    assert _snapshot(cfg.run_dir) == before


def test_rerunning_a_finished_run_unchanged_rewrites_nothing_it_recorded(trained, tmp_path):
    cfg = trained.copy(tmp_path)
    before = _snapshot(cfg.run_dir)
    result = train(cfg, show_progress=False)
    assert result.steps == 4 and _snapshot(cfg.run_dir) == before


def test_more_steps_continue_a_finished_run_exactly_under_a_constant_schedule(trained, tmp_path):
    """Constant LR: steps 1-4 do not depend on the total, so 4 then 6 steps equals 6 steps at once."""
    reference = train_reference(trained.tiny_model, tmp_path / "six", **{"train.max_steps": 6})
    cfg = trained.config(tmp_path / "more", **{"train.max_steps": 6})
    trained.copy(tmp_path / "more")
    assert train(cfg, show_progress=False).steps == 6
    assert_same_weights(adapter(cfg.run_dir), reference.reference)
    assert [r["step"] for r in metrics(cfg.run_dir)] == [1, 2, 3, 4, 5, 6]


def test_more_steps_are_refused_when_the_schedule_depends_on_them(tiny_model, tmp_path):
    linear = train_reference(tiny_model, tmp_path, **{"optim.schedule": "linear", "train.max_steps": 2})
    with pytest.raises(RunDirError, match=r"optim\.schedule"):
        train(linear.config(tmp_path / "out", **{"train.max_steps": 3}), show_progress=False)


def test_an_unfinished_run_refuses_fewer_steps_than_it_has_done(trained, tmp_path):
    trained.copy(tmp_path, after_step=3)
    with pytest.raises(RunDirError, match=r"3 steps"):
        train(trained.config(tmp_path, **{"train.max_steps": 2}), show_progress=False)


def test_a_run_that_failed_before_its_first_checkpoint_restarts_with_a_corrected_config(trained, tmp_path, monkeypatch):
    import opct.training.loop as train_module

    def boom(*_a, **_k):
        raise RuntimeError("out of memory at step 1")

    with monkeypatch.context() as m:
        m.setattr(train_module, "_train_step", boom)
        with pytest.raises(RuntimeError, match="out of memory"):
            train(trained.config(tmp_path, **{"train.sequences_per_microbatch": 8}), show_progress=False)
    cfg = trained.config(tmp_path)  # the corrected configuration
    assert (cfg.run_dir / "manifest.json").exists()
    train(cfg, show_progress=False)
    assert_same_weights(adapter(cfg.run_dir), trained.reference)


HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\\n".encode())
    print("locked", flush=True)
    time.sleep(600)
    """
)


def test_a_second_training_in_the_same_run_directory_is_refused_naming_the_holder(trained, tmp_path):
    cfg = trained.config(tmp_path)
    cfg.run_dir.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(cfg.run_dir / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirError, match=rf"pid {holder.pid}\b"):
            train(cfg, show_progress=False)
        assert not (cfg.run_dir / "manifest.json").exists()
        path = tmp_path / "cfg.yaml"
        path.write_text(yaml.safe_dump(run_config(trained.tiny_model, trained.pairs_file, tmp_path, **trained.overrides)))
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        res = subprocess.run([sys.executable, "-m", "opct.cli", "train", "--no-progress", "-c", str(path)],
                             capture_output=True, text=True, env=env)
        assert res.returncode == 2 and f"pid {holder.pid}" in res.stdout + res.stderr, res.stdout + res.stderr
    finally:
        holder.kill()
        holder.wait()
    # The holder died: its pid is still written in .lock, but the lock went with it.
    assert (cfg.run_dir / ".lock").read_text().strip() == str(holder.pid)
    train(cfg, show_progress=False)
    assert_same_weights(adapter(cfg.run_dir), trained.reference)


def test_two_trainings_started_together_run_one_at_a_time(trained, tmp_path):
    """Two real processes on one directory: the second stops naming the first, and no step is done twice."""
    path = tmp_path / "cfg.yaml"
    long = {**trained.overrides, "train.max_steps": 10_000, "train.checkpoint_every": 10_000}
    path.write_text(yaml.safe_dump(run_config(trained.tiny_model, trained.pairs_file, tmp_path, **long)))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-m", "opct.cli", "train", "--no-progress", "-c", str(path)]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        log = tmp_path / "t" / "metrics.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and first.poll() is None and not (log.exists() and log.read_text()):
            time.sleep(0.05)
        assert first.poll() is None, "the first training stopped"
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        assert first.poll() is None, "the first training stopped while the second ran"
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2 and f"pid {first.pid}" in second.stdout + second.stderr, second.stdout + second.stderr
    lines = (tmp_path / "t" / "metrics.jsonl").read_text().split("\n")[:-1]  # the kill may cut the last one
    steps = [json.loads(line)["step"] for line in lines]
    assert steps == list(range(1, len(steps) + 1))
