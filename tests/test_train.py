"""The training loop end to end: OPCT and BCT, BCT target caching, exact resume, several processes."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import run_config
from safetensors.torch import load_file

from opct.config import RunConfig
from opct.training.loop import RunDirError, train

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}


def _cfg(tiny_model, pairs_file, out, **kw) -> RunConfig:
    return RunConfig.model_validate(run_config(tiny_model, pairs_file, out, **kw))


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _adapter(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "final" / "adapter_model.safetensors"))


def test_opct_run_writes_manifest_metrics_rollouts_and_checkpoints(tiny_model, pairs_file, tmp_path):
    cfg = _cfg(tiny_model, pairs_file, tmp_path)
    result = train(cfg, show_progress=False)
    run = result.run_dir
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["method"] == "opct" and manifest["num_pairs"] == 16 and manifest["teacher_fingerprint"]
    assert manifest["versions"]["torch"].startswith("2.") and manifest["data_hash"]
    rows = _metrics(run)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    for key in ("loss", "kl_to_teacher", "completion_len", "truncation_rate", "tokens_per_s", "lr", "grad_norm"):
        assert key in rows[0]
    assert rows[0]["ratio_abs_log_dev"] < 1e-4  # sampler and learner agree on-policy
    assert abs(rows[0]["loss"] - rows[0]["kl_to_teacher"]) < 1e-5  # ratio = 1 at the first step: loss = KL estimate
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-2", "step-4"]
    assert (run / "final" / "adapter_config.json").exists() and (run / "rollouts.jsonl.gz").exists()


@pytest.mark.parametrize("kind", ["topk", "full"])
def test_vocabulary_losses_train(tiny_model, pairs_file, tmp_path, kind):
    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"opct.loss": {"kind": kind, **({"topk": 5} if kind == "topk" else {})}, "train.logprob_chunk_positions": 3, "train.max_steps": 2})
    train(cfg, show_progress=False)
    rows = _metrics(cfg.run_dir)
    assert len(rows) == 2 and all(r["loss"] >= -1e-6 for r in rows)  # KL-type losses are non-negative


def test_bct_targets_are_teacher_greedy_responses_cached_and_reused(tiny_model, pairs_file, tmp_path, monkeypatch):
    from opct.methods.bct import BCTMethod
    from opct.models import load_model, load_tokenizer, render_prompt
    from opct.pairs import read_pairs
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler

    cfg = _cfg(tiny_model, pairs_file, tmp_path, method="bct", **{"train.max_steps": 2})
    train(cfg, show_progress=False)
    cache = list((cfg.run_dir / "bct_targets").glob("*.jsonl"))
    assert len(cache) == 1
    targets = {r["id"]: r["targets"] for r in map(json.loads, cache[0].read_text().splitlines())}
    tok = load_tokenizer(str(tiny_model))
    base = load_model(cfg.model)
    pairs = read_pairs(pairs_file)
    greedy = HFSampler(base, tok).generate(
        [render_prompt(tok, p.teacher_prompt) for p in pairs], SamplingParams(temperature=0.0, max_new_tokens=8)
    )
    assert all(targets[p.id] == [g.completion_ids] for p, g in zip(pairs, greedy, strict=True))

    # Step 1's loss is the base model's mean NLL of the targets on the *perturbed* prompt, completion tokens only.
    nll, count = 0.0, 0
    for p in pairs:
        prompt = render_prompt(tok, p.prompt)
        for t in targets[p.id]:
            with torch.no_grad():
                lp = torch.log_softmax(base(input_ids=torch.tensor([prompt + t])).logits[0], -1)
            nll -= sum(lp[len(prompt) - 1 + i, tok_id].item() for i, tok_id in enumerate(t))
            count += len(t)
    from opct.training.loop import step_indices

    first = step_indices(0, len(pairs), 4, cfg.seed, True)
    nll_first = count_first = 0
    for i in first:
        p = pairs[i]
        prompt = render_prompt(tok, p.prompt)
        for t in targets[p.id]:
            with torch.no_grad():
                lp = torch.log_softmax(base(input_ids=torch.tensor([prompt + t])).logits[0], -1)
            nll_first -= sum(lp[len(prompt) - 1 + j, tok_id].item() for j, tok_id in enumerate(t))
            count_first += len(t)
    assert abs(_metrics(cfg.run_dir)[0]["loss"] - nll_first / count_first) < 1e-4

    def fail(*_a, **_k):
        raise AssertionError("targets were generated again instead of read from the cache")

    monkeypatch.setattr(BCTMethod, "_generate", fail)
    cfg2 = _cfg(tiny_model, pairs_file, tmp_path, method="bct", **{"train.max_steps": 3})
    train(cfg2, show_progress=False)
    assert len(_metrics(cfg2.run_dir)) == 3


def test_resume_refuses_a_changed_teacher_or_config(tiny_model, pairs_file, tmp_path):
    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"train.max_steps": 2})
    train(cfg, show_progress=False)
    manifest = cfg.run_dir / "manifest.json"
    data = json.loads(manifest.read_text())
    data["teacher_fingerprint"] = "0000"
    manifest.write_text(json.dumps(data))
    with pytest.raises(RunDirError, match="teacher's weights changed"):
        train(cfg, show_progress=False)
    with pytest.raises(RunDirError, match="optim.lr"):
        train(_cfg(tiny_model, pairs_file, tmp_path, **{"optim.lr": 0.1}), show_progress=False)


def _write_cfg(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg))
    return path


def _opct(*args: str) -> list[str]:
    return [sys.executable, "-m", "opct.cli", "train", "--no-progress", *args]


def test_exact_resume_after_sigkill(tiny_model, pairs_file, tmp_path):
    """Killed at a random step and resumed, a run ends with bit-identical weights."""
    steps = 12
    base = run_config(tiny_model, pairs_file, tmp_path, **{"train.max_steps": steps, "train.checkpoint_every": 2, "opct.sampling.max_new_tokens": 6})
    ref_cfg = _write_cfg(tmp_path / "ref.yaml", {**base, "name": "ref"})
    subprocess.run(_opct("-c", str(ref_cfg)), check=True, env=ENV, capture_output=True)

    kill_at = random.Random().randint(3, steps - 3)
    cfg = _write_cfg(tmp_path / "killed.yaml", {**base, "name": "killed"})
    proc = subprocess.Popen(_opct("-c", str(cfg)), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = tmp_path / "killed" / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= kill_at:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"the run finished before it could be killed at step {kill_at}"
    assert not (tmp_path / "killed" / "final").exists()
    subprocess.run(_opct("-c", str(cfg)), check=True, env=ENV, capture_output=True)

    ref, resumed = _adapter(tmp_path / "ref"), _adapter(tmp_path / "killed")
    assert ref.keys() == resumed.keys()
    for k in ref:
        assert torch.equal(ref[k], resumed[k]), f"{k} differs after resuming from a kill at step {kill_at}"
    assert [r["step"] for r in _metrics(tmp_path / "killed")] == list(range(1, steps + 1))
    ref_losses = [r["loss"] for r in _metrics(tmp_path / "ref")]
    assert [r["loss"] for r in _metrics(tmp_path / "killed")] == ref_losses


@pytest.mark.parametrize("method", ["opct", "bct"])
def test_two_processes_match_one(tiny_model, pairs_file, tmp_path, method):
    """accelerate launch --multi_gpu --num_processes 2 on CPU (gloo): same global batch, same loss curve.

    Tolerance: |loss_2proc - loss_1proc| <= 1e-4 * max(1, |loss_1proc|) at every step.
    """
    cfg = run_config(tiny_model, pairs_file, tmp_path, method=method, **{"train.max_steps": 4, "train.sequences_per_microbatch": 2})
    one = _write_cfg(tmp_path / "one.yaml", {**cfg, "name": "one"})
    two = _write_cfg(tmp_path / "two.yaml", {**cfg, "name": "two"})
    subprocess.run(_opct("-c", str(one)), check=True, env=ENV, capture_output=True)
    launch = [str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "opct.cli", "train", "--no-progress", "-c", str(two)]
    res = subprocess.run(launch, env=ENV, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    a, b = _metrics(tmp_path / "one"), _metrics(tmp_path / "two")
    assert json.loads((tmp_path / "two" / "manifest.json").read_text())["num_processes"] == 2
    assert len(a) == len(b) == 4
    for x, y in zip(a, b, strict=True):
        assert abs(x["loss"] - y["loss"]) <= 1e-4 * max(1.0, abs(x["loss"])), (x["loss"], y["loss"])
        assert x["completion_tokens"] == y["completion_tokens"]


def test_tensorboard_tracker_writes_readable_events(tiny_model, pairs_file, tmp_path):
    """``train.trackers: [tensorboard]`` logs every step's metrics and the config (hparams reject None,
    lists and dicts, which the config has)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"train.max_steps": 2, "train.trackers": ["tensorboard"]})
    train(cfg, show_progress=False)
    events = sorted((cfg.run_dir / "trackers").rglob("events.out.tfevents.*"))
    assert events
    scalars = {}
    for path in events:
        acc = EventAccumulator(str(path.parent))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            scalars[tag] = [e.step for e in acc.Scalars(tag)]
    assert scalars["loss"] == [1, 2] and "kl_to_teacher" in scalars


def test_wandb_tracker_in_offline_mode(tiny_model, pairs_file, tmp_path, monkeypatch):
    """``train.trackers: [wandb]`` with ``WANDB_MODE=offline`` writes a local run with the step metrics."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "wandb").mkdir()
    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"train.max_steps": 2, "train.trackers": ["wandb"]})
    train(cfg, show_progress=False)
    runs = list((tmp_path / "wandb").rglob("offline-run-*"))
    assert runs, "no offline run written"
    history = list(runs[0].rglob("*.wandb"))
    assert history and history[0].stat().st_size > 0


def test_a_step_larger_than_the_data_is_an_error(tiny_model, pairs_file, tmp_path):
    """16 pairs cannot fill a 32-pair step without repeating pairs inside it."""
    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"train.pairs_per_step": 32})
    with pytest.raises(ValueError, match="train.pairs_per_step=32 is more than the 16 training pairs"):
        train(cfg, show_progress=False)
    assert not (cfg.run_dir / "checkpoints").exists()
