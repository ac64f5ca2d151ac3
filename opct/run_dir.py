"""A training run's directory: its checkpoints, logs, manifest check and final model.

Layout: ``manifest.json``, ``metrics.jsonl``, ``rollouts.jsonl.gz``, ``checkpoints/step-N/``
(written to a temporary name, then renamed), ``final/`` (the model, loadable with
``from_pretrained``). A run restarted in the same directory resumes from its last checkpoint.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from opct.config import RunConfig, dump_config
from opct.manifest import write_json_atomic
from opct.model_card import write_final_files

RESUMABLE_CHANGES = {
    "output_dir",
    "train.max_steps",
    "train.epochs",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.trackers",
    "train.log_rollouts",
}


class RunDirError(RuntimeError):
    """The run directory cannot be used as asked (different config, different teacher...)."""


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    root = run_dir / "checkpoints"
    if not root.exists():
        return []
    found = []
    for d in root.iterdir():
        if d.is_dir() and d.name.startswith("step-") and d.name[5:].isdigit():
            found.append((int(d.name[5:]), d))
    return sorted(found)


def truncate_jsonl(path: Path, last_step: int, gz: bool = False) -> None:
    """Drop log lines written after the checkpoint a run resumes from."""
    if not path.exists():
        return
    opener = gzip.open if gz else open
    with opener(path, "rt", encoding="utf-8") as fh:
        keep = [line for line in fh if line.strip() and json.loads(line).get("step", 0) <= last_step]
    tmp = path.with_name(path.name + ".tmp")
    with opener(tmp, "wt", encoding="utf-8") as fh:
        fh.writelines(keep)
    tmp.replace(path)


def check_resumable(run_dir: Path, cfg: RunConfig, teacher_fingerprint: str, data_hash: str) -> None:
    old = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    before, now = flatten(old["config"]), flatten(dump_config(cfg))
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k) and k not in RESUMABLE_CHANGES)
    if changed:
        raise RunDirError(
            f"{run_dir} holds a run with a different configuration ({', '.join(changed)}). "
            "Use another train name/output_dir, or delete the directory to start over."
        )
    if old.get("teacher_fingerprint") != teacher_fingerprint:
        raise RunDirError(
            f"refusing to resume {run_dir}: the teacher's weights changed "
            f"(fingerprint {old.get('teacher_fingerprint')} at the start, {teacher_fingerprint} now). "
            "OPCT's teacher is the run-start model and must not change during a run."
        )
    if old.get("data_hash") != data_hash:
        raise RunDirError(f"refusing to resume {run_dir}: the training pairs changed since the run started.")


def save_trainable_only(models: list[torch.nn.Module], weights: list[dict[str, Any]], output_dir: str) -> None:
    """accelerate save hook: keep only trainable tensors (the adapter under LoRA)."""
    for model, state in zip(models, weights, strict=False):
        trainable = {name for name, p in model.named_parameters() if p.requires_grad}
        for key in list(state):
            if key not in trainable:
                del state[key]


def save_checkpoint(acc: Accelerator, run_dir: Path, step: int, keep: int) -> None:
    root = run_dir / "checkpoints"
    final, tmp = root / f"step-{step}", root / f"step-{step}.tmp"
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    acc.wait_for_everyone()
    acc.save_state(str(tmp))
    acc.wait_for_everyone()
    if acc.is_main_process:
        write_json_atomic(tmp / "trainer_state.json", {"step": step})
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for _, old in list_checkpoints(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    acc.wait_for_everyone()


def save_final(
    acc: Accelerator, model: torch.nn.Module, tokenizer: Any, cfg: RunConfig, run_dir: Path, identity: dict[str, Any]
) -> Path:
    """Write ``final/`` atomically: weights (the adapter under LoRA), tokenizer, ``opct_checkpoint.json``
    and the model card (:mod:`opct.model_card`; ``identity``: ``base_weights``, ``data_hash``, ``num_pairs``)."""
    final, tmp = run_dir / "final", run_dir / "final.tmp"
    acc.wait_for_everyone()
    state = acc.get_state_dict(model)
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        unwrapped = acc.unwrap_model(model)
        unwrapped.save_pretrained(tmp, state_dict=state)
        tokenizer.save_pretrained(tmp)
        write_final_files(tmp, cfg, **identity)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    acc.wait_for_everyone()
    return final


class MetricsWriter:
    def __init__(self, run_dir: Path, enabled: bool, log_rollouts: bool):
        self.enabled = enabled
        self.metrics = run_dir / "metrics.jsonl"
        self.rollouts = run_dir / "rollouts.jsonl.gz" if log_rollouts else None

    def write(self, record: dict[str, Any], rollouts: list[dict[str, Any]]) -> None:
        if not self.enabled:
            return
        with self.metrics.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.rollouts is not None and rollouts:
            with gzip.open(self.rollouts, "at", encoding="utf-8") as fh:
                for r in rollouts:
                    fh.write(json.dumps(r, ensure_ascii=False) + "\n")
