"""The training loop end to end: OPCT and BCT, BCT target caching, exact resume, several processes."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO, one_thread, run_config
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


def _train_at_one_thread(cfg: dict) -> None:
    """``opct train`` on ``cfg`` in this process at one CPU thread, as the subprocesses of ``ENV`` train
    (OMP_NUM_THREADS=1): the same arithmetic, without starting another interpreter."""
    with one_thread():
        train(RunConfig.model_validate(cfg), show_progress=False)


def test_exact_resume_after_sigkill(tiny_model, pairs_file, tmp_path):
    """Killed at a random step and resumed, a run ends with bit-identical weights."""
    steps = 12
    base = run_config(tiny_model, pairs_file, tmp_path, **{"train.max_steps": steps, "train.checkpoint_every": 2, "opct.sampling.max_new_tokens": 6})
    _train_at_one_thread({**base, "name": "ref"})  # the reference, never killed

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
    two = _write_cfg(tmp_path / "two.yaml", {**cfg, "name": "two"})
    _train_at_one_thread({**cfg, "name": "one"})
    launch = [str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "opct.cli", "train", "--no-progress", "-c", str(two)]
    res = subprocess.run(launch, env=ENV, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    a, b = _metrics(tmp_path / "one"), _metrics(tmp_path / "two")
    assert json.loads((tmp_path / "two" / "manifest.json").read_text())["num_processes"] == 2
    assert len(a) == len(b) == 4
    for x, y in zip(a, b, strict=True):
        assert abs(x["loss"] - y["loss"]) <= 1e-4 * max(1.0, abs(x["loss"])), (x["loss"], y["loss"])
        assert x["completion_tokens"] == y["completion_tokens"]


def _scalars(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = {}
    for events_dir in sorted({path.parent for path in folder.rglob("events.out.tfevents.*")}):
        acc = EventAccumulator(str(events_dir))  # reads every events file of the folder
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            scalars.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return scalars


def test_tensorboard_tracker_writes_namespaced_keys_and_the_runs_results(tiny_model, pairs_file, tmp_path):
    """``train.trackers: [tensorboard]``: train/ keys per step (no ``step`` scalar), in the project's folder
    of the run's trackers/; an eval's and an attack's results, logged after training as an experiment does,
    go to the same run at its last step under eval/ and attack/."""
    from opct.experiments.runner import track_results

    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"train.max_steps": 2, "train.trackers": ["tensorboard"],
                                                    "train.tracker_project": "my-project"})
    train(cfg, show_progress=False)
    folder = cfg.run_dir / "trackers" / "my-project"
    scalars = _scalars(folder)
    assert [step for step, _ in scalars["train/loss"]] == [1, 2] and "train/kl_to_teacher" in scalars
    assert not any(tag in ("step", "train/step", "loss") for tag in scalars)
    evals, attack = tmp_path / "eval", tmp_path / "attack"
    (evals / "sycophancy").mkdir(parents=True)
    (evals / "sycophancy" / "results.json").write_text(json.dumps(
        {"metrics": {"sycophancy_rate": {"value": 0.25, "n": 8}, "consistency": {"value": float("nan"), "n": 0}}}))
    attack.mkdir()
    (attack / "results.json").write_text(json.dumps({"metrics": {"asr": {"value": 0.5, "n": 4}}}))
    track_results(cfg.run_dir, "eval", evals)
    track_results(cfg.run_dir, "attack", attack)
    scalars = _scalars(folder)
    assert scalars["eval/sycophancy/sycophancy_rate"] == [(2, 0.25)] and scalars["attack/asr"] == [(2, 0.5)]
    assert "eval/sycophancy/consistency" not in scalars  # nothing scored: no number to log


def test_wandb_tracker_in_offline_mode(tiny_model, pairs_file, tmp_path):
    """``train.trackers: [wandb]`` offline: the run's files under its trackers/, in the project with the
    entity and tags asked for, train/ keys (no ``step`` scalar), and results logged after training go to
    the same W&B run (one id). Each part runs as its own process, as ``opct`` does: W&B's service writes
    the ``.wandb`` file when the process ends."""
    from opct.config import dump_config

    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"train.max_steps": 2, "train.trackers": ["wandb"],
                                                    "train.tracker_project": "my-project", "train.tracker_entity": "my-team",
                                                    "train.tracker_tags": ["ablation-7"]})
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(dump_config(cfg)))
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "PYTHONPATH": str(REPO)}
    env.pop("WANDB_DIR", None)
    done = subprocess.run([sys.executable, "-m", "opct.cli.main", "train", "--no-progress", "-c", str(config)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    run_id = (cfg.run_dir / "trackers" / "wandb-run-id").read_text().strip()
    runs = list((cfg.run_dir / "trackers" / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(runs) == 1, list((cfg.run_dir / "trackers").rglob("*"))
    history = _wandb_file(runs[0], b"train/loss")
    assert b"my-project" in history and b"my-team" in history and b"ablation-7" in history
    assert b"train/loss" in history and not re.search(rb"train/step(?![_a-z])", history)  # train/step_time_s is a metric
    log = (f"from pathlib import Path; from opct.training.tracking import log_to_run; "
           f"assert log_to_run(Path({str(cfg.run_dir)!r}), {{'eval/sycophancy/sycophancy_rate': 0.25}})")
    done = subprocess.run([sys.executable, "-c", log], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    again = list((cfg.run_dir / "trackers" / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(again) == 2  # the same run id: W&B syncs both into one run
    resumed = next(r for r in again if r != runs[0])
    assert b"eval/sycophancy/sycophancy_rate" in _wandb_file(resumed, b"eval/sycophancy/sycophancy_rate")


def _wandb_file(run_folder, expected: bytes, wait_s: float = 90.0) -> bytes:
    """An offline run's ``.wandb`` file once ``expected`` is in it, or as it is after ``wait_s``: W&B's
    service process writes it in the background, after the process that logged has ended."""
    deadline = time.monotonic() + wait_s
    while True:
        data = b"".join(f.read_bytes() for f in run_folder.glob("*.wandb"))
        if expected in data or time.monotonic() > deadline:
            return data
        time.sleep(0.5)


def test_a_step_larger_than_the_data_is_an_error(tiny_model, pairs_file, tmp_path):
    """16 pairs cannot fill a 32-pair step without repeating pairs inside it."""
    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"train.pairs_per_step": 32})
    with pytest.raises(ValueError, match="train.pairs_per_step=32 is more than the 16 training pairs"):
        train(cfg, show_progress=False)
    assert not (cfg.run_dir / "checkpoints").exists()


def test_a_trl_style_pair_file_without_ids_trains(tiny_model, tmp_path):
    """``prompt`` and ``teacher_prompt`` only (TRL's layout): the pairs get derived ids and the run trains;
    its rollouts name the derived ids."""
    import gzip

    from conftest import make_pairs

    rows = [{"prompt": p["prompt"], "teacher_prompt": p["teacher_prompt"]} for p in make_pairs()]
    trl = tmp_path / "trl.jsonl"
    trl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = _cfg(tiny_model, trl, tmp_path, **{"train.max_steps": 1})
    with pytest.warns(UserWarning, match=r"16 of 16 pairs have no 'id'"):
        train(cfg, show_progress=False)
    assert [r["step"] for r in _metrics(cfg.run_dir)] == [1]
    with gzip.open(cfg.run_dir / "rollouts.jsonl.gz", "rt") as fh:
        assert all(json.loads(line)["pair_id"].startswith("pair-") for line in fh)
