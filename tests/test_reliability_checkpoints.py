"""A checkpoint is loaded only as what it claims: no code without the command's consent, exactly its
tensors, its base checked in every dtype, damaged files named, and a failed write leaves nothing
half-written (issue 30, part A)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from conftest import run_config
from run_helpers import Trained, rehash, train_reference
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from opct.cli.main import app
from opct.models import CheckpointError, inference_spec, load_for_inference
from opct.runs.checkpoint import verify_checkpoint
from opct.runs.errors import RemoteCodeNotAllowedError

DTYPES = ["float32", "bfloat16", "float16"]


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory) -> Trained:
    """A finished 4-step LoRA run, checkpointed at every step, with a constant schedule (so it can grow)."""
    return train_reference(tiny_model, tmp_path_factory.mktemp("reliability"), **{"optim.schedule": "constant"})


def _cli(argv: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in argv])
    return result.exit_code, result.output


def _error_line(output: str) -> str:
    return next((line for line in output.splitlines() if line.startswith("error:")), output)


def _eval(model: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "--model", str(model), "--evals", "capability", "--limit", "1", "--max-new-tokens", "2",
            "--out", str(out), "--no-progress", *extra]


def _record(folder: Path) -> dict:
    return json.loads((folder / "opct_checkpoint.json").read_text())


def _write_record(folder: Path, record: dict) -> None:
    (folder / "opct_checkpoint.json").write_text(json.dumps(record))


def _own_base(trained: Trained, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the finished run whose adapter points at a private copy of its base: ``(run_dir, base)``."""
    run_dir, base = tmp_path / "run", tmp_path / "base"
    shutil.copytree(trained.run_dir, run_dir)
    shutil.copytree(trained.tiny_model, base)
    _write_record(run_dir / "final", {**_record(run_dir / "final"), "base_model": str(base)})
    return run_dir, base


# --------------------------------------------------------------------------- 1. consent for code


def _remote_code_checkpoint(trained: Trained, tmp_path: Path, name: str, monkeypatch) -> tuple[Path, Path]:
    """A full-model checkpoint folder whose config maps the model to code in its own files, and whose record
    says trust_remote_code: true. Importing that code writes a marker file: ``(folder, marker)``."""
    import transformers.dynamic_module_utils as modules

    monkeypatch.setattr(modules, "HF_MODULES_CACHE", str(tmp_path / "hf_modules"))
    folder, marker = tmp_path / f"ckpt_{name}", tmp_path / f"RAN_{name}"
    shutil.copytree(trained.tiny_model, folder)
    module = re.sub(r"\W", "_", f"remote_{name}_{tmp_path.name}")  # a module name of its own per test
    (folder / f"{module}.py").write_text(
        f"open({str(marker)!r}, 'a').write('ran')\n"
        "from transformers import LlamaForCausalLM\n\n\nclass MarkedLlama(LlamaForCausalLM):\n    pass\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": f"{module}.MarkedLlama"}
    (folder / "config.json").write_text(json.dumps(config))
    record = _record(trained.run_dir / "final")
    _write_record(folder, {**record, "finetune": "full", "model": {**record["model"], "trust_remote_code": True}})
    return folder, marker


@pytest.mark.parametrize("command", ["eval", "attack", "export"])
def test_a_checkpoint_record_never_turns_remote_code_on(trained, tmp_path, monkeypatch, command):
    folder, marker = _remote_code_checkpoint(trained, tmp_path, command, monkeypatch)
    argv = {"eval": _eval(folder, tmp_path / "ev"),
            "attack": ["attack", "--model", folder, "--out", tmp_path / "at", "--no-static", "--budget", "1",
                       "--max-new-tokens", "2", "--no-progress"],
            "export": ["export", folder, "--out", tmp_path / "exported"]}[command]
    code, output = _cli(argv)
    assert not marker.exists(), f"opct {command} ran the checkpoint's own code without --trust-remote-code"
    assert code == 2, output
    line = _error_line(output)
    assert "trust_remote_code: true" in line and "--trust-remote-code" in line and "opct_checkpoint.json" in line


def test_the_command_line_flag_is_the_consent(trained, tmp_path, monkeypatch):
    folder, marker = _remote_code_checkpoint(trained, tmp_path, "flag", monkeypatch)
    code, output = _cli(["export", folder, "--out", tmp_path / "exported", "--trust-remote-code"])
    assert code == 0, output
    assert marker.exists()  # the user asked for it: the model's own class was used


def test_a_lora_record_asking_for_remote_code_is_refused_without_consent(trained, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(trained.run_dir, run_dir)
    record = _record(run_dir / "final")
    _write_record(run_dir / "final", {**record, "model": {**record["model"], "trust_remote_code": True}})
    assert inference_spec(str(run_dir)).trust_remote_code is False  # never inherited from the record
    with pytest.raises(RemoteCodeNotAllowedError, match="--trust-remote-code"):
        load_for_inference(str(run_dir))
    model, _ = load_for_inference(str(run_dir), trust_remote_code=True)  # the caller's own consent
    assert model is not None


# --------------------------------------------------------------------------- 2. exactly its tensors


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tamper", ["missing", "unexpected"])
def test_an_adapter_without_or_with_extra_tensors_is_refused_in_every_dtype(trained, tmp_path, dtype, tamper):
    """Without its lora_B tensors an adapter is the untouched base: it must never be measured as the run."""
    run_dir = tmp_path / "run"
    shutil.copytree(trained.run_dir, run_dir)
    weights = run_dir / "final" / "adapter_model.safetensors"
    tensors = load_file(weights)
    if tamper == "missing":
        named = sorted(k for k in tensors if "lora_B" in k)
        tensors = {k: v for k, v in tensors.items() if k not in named}
    else:
        named = ["base_model.model.bogus.lora_A.weight"]
        tensors[named[0]] = torch.zeros(2, 2)
    save_file(tensors, weights, metadata={"format": "pt"})
    with pytest.raises(CheckpointError) as info:
        load_for_inference(str(run_dir), dtype=dtype)
    message = str(info.value)
    assert str(weights) in message and f"{tamper} {len(named)} (" in message and named[0] in message


def test_a_full_checkpoint_missing_a_tensor_is_refused(trained, tmp_path):
    folder = tmp_path / "full"
    shutil.copytree(trained.tiny_model, folder)
    record = _record(trained.run_dir / "final")
    _write_record(folder, {**record, "finetune": "full"})
    tensors = load_file(folder / "model.safetensors")
    gone = sorted(tensors)[1]
    del tensors[gone]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    for dtype in DTYPES:
        with pytest.raises(CheckpointError, match=re.escape(f"missing 1 ({gone})")):
            load_for_inference(str(folder), dtype=dtype)


@pytest.mark.parametrize("command", ["eval", "export"])
def test_eval_and_export_of_a_broken_adapter_fail_naming_the_tensors(trained, tmp_path, command):
    run_dir = tmp_path / "run"
    shutil.copytree(trained.run_dir, run_dir)
    weights = run_dir / "final" / "adapter_model.safetensors"
    save_file({k: v for k, v in load_file(weights).items() if "lora_B" not in k}, weights, metadata={"format": "pt"})
    argv = _eval(run_dir, tmp_path / "ev") if command == "eval" else ["export", run_dir, "--out", tmp_path / "exported"]
    code, output = _cli(argv)
    assert code == 2, output
    assert re.search(r"missing \d+ \(base_model\.model\..*lora_B", _error_line(output))
    assert not (tmp_path / "exported").exists() and not list((tmp_path / "ev").rglob("results.json"))


# --------------------------------------------------------------------------- 3. the base checked in every dtype


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_changed_base_is_refused_in_every_dtype(trained, tmp_path, dtype):
    run_dir, base = _own_base(trained, tmp_path)
    load_for_inference(str(run_dir), dtype=dtype)  # the untouched base loads in every dtype
    tensors = load_file(base / "model.safetensors")
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 1e-3
    save_file(tensors, base / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="now holds"):
        load_for_inference(str(run_dir), dtype=dtype)


def test_export_in_another_dtype_checks_the_base(trained, tmp_path):
    run_dir, base = _own_base(trained, tmp_path)
    tensors = load_file(base / "model.safetensors")
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] * 1.01
    save_file(tensors, base / "model.safetensors", metadata={"format": "pt"})
    code, output = _cli(["export", run_dir, "--out", tmp_path / "exported", "--dtype", "bfloat16"])
    assert code == 2 and "now holds" in _error_line(output), output


# --------------------------------------------------------------------------- 4. damaged files, named


@pytest.mark.parametrize("content", ["truncated", "a list", "no optimizer"])
def test_a_damaged_state_json_is_named_never_an_internal_error(trained, tmp_path, content):
    cfg = trained.copy(tmp_path / "out", after_step=2)
    for ckpt in sorted((cfg.run_dir / "checkpoints").iterdir()):  # every checkpoint, its hashes made to agree
        state = ckpt / "state.json"
        text = state.read_text()
        data = json.loads(text)
        state.write_text({"truncated": text[: len(text) // 2], "a list": "[]",
                          "no optimizer": json.dumps({k: v for k, v in data.items() if k != "optimizer"})}[content])
        rehash(ckpt)
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(run_config(trained.tiny_model, trained.pairs_file, tmp_path / "out", **trained.overrides)))
    code, output = _cli(["train", "--no-progress", "-c", config])
    line = _error_line(output)
    assert code == 1 and "internal error" not in line, output
    assert "state.json" in line and str(cfg.run_dir / "checkpoints") in line and "start the run over" in line


def test_a_damaged_newest_state_json_falls_back_to_the_previous_checkpoint(trained, tmp_path):
    from opct.training.loop import train

    cfg = trained.copy(tmp_path, after_step=3)
    ckpt = cfg.run_dir / "checkpoints" / "step-3"
    (ckpt / "state.json").write_text("[]")
    rehash(ckpt)
    assert "state.json" in verify_checkpoint(ckpt)
    with pytest.warns(UserWarning, match=r"(?s)step-3.*state\.json.*step-2"):
        train(cfg, show_progress=False)


@pytest.mark.parametrize("content", ['{"format": 2, "model": ', "[1]", '{"model": 7}'])
@pytest.mark.parametrize("command", ["eval", "export"])
def test_a_damaged_checkpoint_record_is_named(trained, tmp_path, command, content):
    run_dir = tmp_path / "run"
    shutil.copytree(trained.run_dir, run_dir)
    (run_dir / "final" / "opct_checkpoint.json").write_text(content)
    argv = _eval(run_dir, tmp_path / "ev") if command == "eval" else ["export", run_dir, "--out", tmp_path / "exported"]
    code, output = _cli(argv)
    line = _error_line(output)
    assert code == 2 and "internal error" not in line, output
    assert str(run_dir / "final" / "opct_checkpoint.json") in line and "opct train" in line


@pytest.mark.parametrize("content", ['{"config": []}', '{"config": {"train": ', "7"])
def test_a_damaged_manifest_is_named_when_resuming(trained, tmp_path, content):
    cfg = trained.copy(tmp_path / "out", after_step=2)
    (cfg.run_dir / "manifest.json").write_text(content)
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(run_config(trained.tiny_model, trained.pairs_file, tmp_path / "out", **trained.overrides)))
    code, output = _cli(["train", "--no-progress", "-c", config])
    line = _error_line(output)
    assert code == 2 and "internal error" not in line and str(cfg.run_dir / "manifest.json") in line, output


def _disk_full_at(monkeypatch, call: int) -> None:
    """safetensors' writer fails as on a full disk from its ``call``-th call on (a SafetensorError, no OSError)."""
    import opct.runs.checkpoint as checkpoint

    real, seen = checkpoint.save_file, {"n": 0}

    def save_file_on_a_full_disk(tensors, filename, *args, **kwargs):
        seen["n"] += 1
        if seen["n"] >= call:
            raise SafetensorError(f'Error while serializing: I/O error: No space left on device (os error 28) at path '
                                  f'"{Path(filename).parent / ".tmpX1y2Z3"}"')
        return real(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "save_file", save_file_on_a_full_disk)


def test_a_full_disk_while_checkpointing_keeps_the_previous_checkpoint(trained, tmp_path, monkeypatch):
    config = tmp_path / "cfg.yaml"
    tree = run_config(trained.tiny_model, trained.pairs_file, tmp_path / "out",
                      **{**trained.overrides, "train.max_steps": 3})
    config.write_text(yaml.safe_dump(tree))
    _disk_full_at(monkeypatch, 3)  # step 1: model, optimizer; step 2: its model file fails
    code, output = _cli(["train", "--no-progress", "-c", config])
    line = _error_line(output)
    checkpoints = tmp_path / "out" / "t" / "checkpoints"
    assert code == 1 and "internal error" not in line, output
    assert "no space left on the device" in line and str(checkpoints / "step-2.tmp" / "model.safetensors") in line
    assert str(checkpoints / "step-1") in line  # it says which checkpoint is kept
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-1"]  # nothing half-written left
    assert verify_checkpoint(checkpoints / "step-1") is None
    monkeypatch.undo()
    code, output = _cli(["train", "--no-progress", "-c", config])  # space freed: the same command continues
    assert code == 0 and "done: 3 steps" in output, output


def test_a_full_disk_while_writing_final_leaves_no_half_written_final(trained, tmp_path, monkeypatch):
    import errno

    import opct.runs.final as final

    cfg = trained.copy(tmp_path / "out", after_step=4)  # every step done: the rerun only writes final/

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")  # a failed write() names no file

    monkeypatch.setattr(final, "write_final_files", full_disk)
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(run_config(trained.tiny_model, trained.pairs_file, tmp_path / "out", **trained.overrides)))
    code, output = _cli(["train", "--no-progress", "-c", config])
    line = _error_line(output)
    assert code == 1 and "no space left on the device" in line and "final.tmp" in line, output
    assert not (cfg.run_dir / "final.tmp").exists() and not (cfg.run_dir / "final").exists()
    assert verify_checkpoint(cfg.run_dir / "checkpoints" / "step-4") is None


# --------------------------------------------------------------------------- 5. the manifest keeps its first start


def test_a_resumed_run_keeps_the_manifests_created_time(trained, tmp_path):
    from opct.training.loop import train

    cfg = trained.copy(tmp_path, after_step=2)
    manifest = cfg.run_dir / "manifest.json"
    first = "2020-01-02T03:04:05+0000"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "created": first}))
    train(cfg, show_progress=False)
    resumed = json.loads(manifest.read_text())
    assert resumed["created"] == first
    assert len(resumed["resumed"]) == 1 and resumed["resumed"][0] != first
    grown = trained.config(tmp_path, **{"train.max_steps": 5})  # a finished run grown by a step: a second resume
    train(grown, show_progress=False)
    again = json.loads(manifest.read_text())
    assert again["created"] == first and len(again["resumed"]) == 2


def test_a_run_that_starts_over_gets_a_new_created_time(trained, tmp_path):
    from opct.training.loop import train

    cfg = trained.copy(tmp_path, after_step=2)
    shutil.rmtree(cfg.run_dir / "checkpoints")  # nothing to resume from: the run starts over
    manifest = cfg.run_dir / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "created": "2020-01-02T03:04:05+0000"}))
    train(cfg, show_progress=False)
    fresh = json.loads(manifest.read_text())
    assert fresh["created"] != "2020-01-02T03:04:05+0000" and "resumed" not in fresh


# --------------------------------------------------------------------------- 6. a finished run says so


def test_rerunning_a_finished_run_says_it_is_complete_and_shows_no_loss(trained, tmp_path):
    """A finished run rerun as it was trains nothing: it printed ``4/4 loss 0.0000 kl 0.0000`` (a bar
    with no step behind its figures), which reads as a collapse; it now says so, with no loss figure."""
    trained.copy(tmp_path / "out")
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(run_config(trained.tiny_model, trained.pairs_file, tmp_path / "out", **trained.overrides)))
    code, output = _cli(["train", "-c", config])  # the progress bar on, as a user runs it
    assert code == 0, output
    assert "already complete at step 4; nothing trained" in output
    assert "loss" not in output and "done:" not in output
    resumed = trained.copy(tmp_path / "again", after_step=3)
    config.write_text(yaml.safe_dump(run_config(trained.tiny_model, trained.pairs_file, tmp_path / "again", **trained.overrides)))
    code, output = _cli(["train", "-c", config])
    assert code == 0 and "done: 4 steps (resumed at step 3)" in output, output
    assert resumed.run_dir.exists() and not re.search(r"loss 0\.0000\s+kl 0\.0000", output)
