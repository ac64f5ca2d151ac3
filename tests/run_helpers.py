"""Helpers for the run-directory tests: one trained run to copy, and checkpoint surgery."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from conftest import make_pairs, run_config
from safetensors.torch import load_file

from opct.config import RunConfig

#: Every step is checkpointed and all four are kept, so a test can pretend the run died after any step.
EVERY_STEP = {"train.checkpoint_every": 1, "train.keep_checkpoints": 4}


@dataclass
class Trained:
    """A finished 4-step run: its settings, its directory and its final adapter (the reference)."""

    tiny_model: Path
    pairs_file: Path
    run_dir: Path
    reference: dict[str, torch.Tensor]
    overrides: dict[str, Any] = field(default_factory=dict)

    def config(self, out: Path, **kw: Any) -> RunConfig:
        """The run's configuration with ``output_dir=out`` (and any further overrides)."""
        return RunConfig.model_validate(run_config(self.tiny_model, self.pairs_file, out, **{**self.overrides, **kw}))

    def copy(self, out: Path, after_step: int | None = None, **kw: Any) -> RunConfig:
        """Copy the run under ``out``; with ``after_step``, as if it had been killed after that checkpoint."""
        cfg = self.config(out, **kw)
        shutil.copytree(self.run_dir, cfg.run_dir)
        if after_step is not None:
            interrupt(cfg.run_dir, after_step)
        return cfg


def write_pairs(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in make_pairs()), encoding="utf-8")
    return path


def train_reference(tiny_model: Path, root: Path, **overrides: Any) -> Trained:
    from opct.training.loop import train

    root.mkdir(parents=True, exist_ok=True)
    pairs = write_pairs(root / "pairs.jsonl")
    overrides = {**EVERY_STEP, **overrides}
    cfg = RunConfig.model_validate(run_config(tiny_model, pairs, root / "out", **overrides))
    train(cfg, show_progress=False)
    return Trained(tiny_model, pairs, cfg.run_dir, adapter(cfg.run_dir), overrides)


def adapter(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "final" / "adapter_model.safetensors"))


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs"


def interrupt(run_dir: Path, after_step: int) -> None:
    """Remove ``final/`` and every checkpoint after ``after_step`` (the logs keep their later lines)."""
    shutil.rmtree(run_dir / "final")
    for ckpt in (run_dir / "checkpoints").iterdir():
        if int(ckpt.name.split("-")[1]) > after_step:
            shutil.rmtree(ckpt)


def rehash(ckpt: Path) -> None:
    """Make a checkpoint's ``checkpoint.json`` agree with its (edited) files, when it has one."""
    meta = ckpt / "checkpoint.json"
    if not meta.exists():
        return
    data = json.loads(meta.read_text())
    for name in data["files"]:
        path = ckpt / name
        data["files"][name] = {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    meta.write_text(json.dumps(data))


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
