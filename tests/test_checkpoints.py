"""Checkpoints: loaded strictly, never unpickled, hashed, and a damaged newest one falls back to an older one."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
import torch
from run_helpers import Trained, adapter, assert_same_weights, rehash, train_reference
from safetensors.torch import load_file, save_file

from opct.training.loop import RunDirError, train


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory) -> Trained:
    return train_reference(tiny_model, tmp_path_factory.mktemp("trained"))


@pytest.mark.parametrize("tamper", ["missing", "unexpected"])
def test_a_checkpoint_missing_or_adding_a_tensor_is_refused_naming_the_key(trained, tmp_path, tamper):
    """A model file without its adapter tensors would otherwise resume as an untrained adapter."""
    cfg = trained.copy(tmp_path, after_step=2)
    ckpt = cfg.run_dir / "checkpoints" / "step-2"
    tensors = load_file(str(ckpt / "model.safetensors"))
    if tamper == "missing":
        dropped = sorted(k for k in tensors if "lora_B" in k)
        assert dropped
        for k in dropped:
            del tensors[k]
        key = dropped[0]
    else:
        key = "base_model.model.bogus.weight"
        tensors[key] = torch.zeros(3)
    save_file(tensors, str(ckpt / "model.safetensors"))
    rehash(ckpt)
    with pytest.raises(RunDirError, match=re.escape(key)):
        train(cfg, show_progress=False)
    assert not (cfg.run_dir / "final").exists()


class _Payload:
    """Unpickling this runs code: it writes the marker file."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('unpickled')",))


#: Every file name accelerate's save_state/load_state reads through pickle, plus the obvious others.
PICKLE_NAMES = [
    "pytorch_model.bin", "optimizer.bin", "optimizer_1.bin", "scheduler.bin", "scheduler_1.bin", "sampler.bin",
    "dl_state_dict.bin", "scaler.pt", "random_states_0.pkl", "random_states_1.pkl", "custom_checkpoint_0.pkl",
    "custom_checkpoint_1.pkl", "custom_checkpoint_2.pkl", "optimizer.pt", "trainer_state.pt",
]


def test_resume_never_unpickles_anything_in_the_run_directory(trained, tmp_path):
    cfg = trained.copy(tmp_path, after_step=2)
    marker = tmp_path / "pwned"
    folders = [cfg.run_dir, *sorted((cfg.run_dir / "checkpoints").iterdir())]
    for folder in folders:
        for name in PICKLE_NAMES:
            torch.save(_Payload(str(marker)), folder / name)
    train(cfg, show_progress=False)
    assert not marker.exists(), "a pickle from the run directory was loaded with weights_only=False"
    assert_same_weights(adapter(cfg.run_dir), trained.reference)  # and the resume is still exact


def test_every_checkpoint_lists_the_size_and_sha256_of_each_of_its_files(trained):
    ckpts = sorted((trained.run_dir / "checkpoints").iterdir())
    assert [c.name for c in ckpts] == ["step-1", "step-2", "step-3", "step-4"]
    for ckpt in ckpts:
        meta = json.loads((ckpt / "checkpoint.json").read_text())
        assert meta["step"] == int(ckpt.name[5:])
        on_disk = sorted(p.name for p in ckpt.iterdir() if p.name != "checkpoint.json")
        assert sorted(meta["files"]) == on_disk
        assert {"model.safetensors", "optimizer.safetensors", "state.json"} <= set(on_disk)
        assert not [n for n in on_disk if n.endswith((".pkl", ".bin", ".pt"))]  # nothing is pickled
        for name, entry in meta["files"].items():
            data = (ckpt / name).read_bytes()
            assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _damage(ckpt, how: str) -> None:
    if how == "truncated-model":
        path = ckpt / "model.safetensors"
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "truncated-optimizer":
        path = ckpt / "optimizer.safetensors"
        path.write_bytes(path.read_bytes()[:-7])
    elif how == "missing-state":
        (ckpt / "state.json").unlink()
    elif how == "flipped-byte":  # same size, different content: only the hash sees it
        path = ckpt / "model.safetensors"
        data = bytearray(path.read_bytes())
        data[-5] ^= 0x40
        path.write_bytes(bytes(data))
    elif how == "no-manifest":
        (ckpt / "checkpoint.json").unlink()


@pytest.mark.parametrize("how", ["truncated-model", "truncated-optimizer", "missing-state", "flipped-byte", "no-manifest"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(trained, tmp_path, how):
    cfg = trained.copy(tmp_path, after_step=3)
    _damage(cfg.run_dir / "checkpoints" / "step-3", how)
    with pytest.warns(UserWarning, match=r"(?s)step-3.*step-2"):
        train(cfg, show_progress=False)
    assert_same_weights(adapter(cfg.run_dir), trained.reference)


def test_no_valid_checkpoint_is_an_error_naming_the_folder(trained, tmp_path):
    cfg = trained.copy(tmp_path, after_step=2)
    for ckpt in (cfg.run_dir / "checkpoints").iterdir():
        _damage(ckpt, "truncated-model")
    manifest = (cfg.run_dir / "manifest.json").read_bytes()
    with pytest.raises(RunDirError, match=re.escape(str(cfg.run_dir / "checkpoints"))):
        train(cfg, show_progress=False)
    assert (cfg.run_dir / "manifest.json").read_bytes() == manifest
    assert not (cfg.run_dir / "final").exists()
