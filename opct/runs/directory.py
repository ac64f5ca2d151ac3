"""``RunDirectory``: a training run's directory as one object, its layout and its lifecycle.

The training loop (:func:`opct.training.loop.train`) goes through it for everything it keeps on disk::

    run = RunDirectory(cfg.run_dir)
    with run.locked(acc):                       # one training per directory
        start = run.resume_point(cfg, ...)      # from scratch, from a checkpoint, or finished
        run.write_manifest(manifest)
        writer = run.metrics_writer(...)        # metrics.jsonl, rollouts.jsonl.gz
        run.save_checkpoint(acc, step, ...)     # checkpoints/step-N/
        run.save_final(acc, model, ...)         # final/

The paths themselves are :class:`~opct.runs.layout.RunLayout`'s; what each step does is in the module
named beside it.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from opct.config import RunConfig
from opct.runs.atomic import write_json_atomic
from opct.runs.checkpoint import ShardedState, load_checkpoint, save_checkpoint
from opct.runs.final import save_final
from opct.runs.layout import RunLayout
from opct.runs.lock import run_lock
from opct.runs.logs import JsonlAppender, MetricsWriter, recover_log
from opct.runs.manifest import keep_history
from opct.runs.resume import ResumePoint, resume_point


class RunDirectory:
    """A training run's directory: where its files are (:attr:`layout`) and what may happen to them."""

    def __init__(self, root: str | Path) -> None:
        self.layout = RunLayout(Path(root))
        self._resumed = False  # whether resume_point found a checkpoint to continue from

    @property
    def root(self) -> Path:
        return self.layout.root

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.root)!r})"

    # -- lifecycle -------------------------------------------------------------------------------
    def locked(self, acc: Accelerator) -> AbstractContextManager[None]:
        """Hold the directory's lock while training (:func:`opct.runs.lock.run_lock`)."""
        return run_lock(self.layout, acc)

    def resume_point(self, cfg: RunConfig, teacher_fingerprint: str, data_hash: str, steps: int) -> ResumePoint:
        """How a (re)started run begins here (:func:`opct.runs.resume.resume_point`)."""
        point = resume_point(self.layout, cfg, teacher_fingerprint, data_hash, steps)
        self._resumed = point.checkpoint is not None
        return point

    def clear_logs(self) -> None:
        """Remove the logs of an earlier attempt (a run that starts over keeps nothing of it)."""
        for log in self.layout.logs:
            log.unlink(missing_ok=True)

    def recover_logs(self, step: int) -> None:
        """Cut the logs back to ``step`` and drop a tail damaged by a kill (:func:`opct.runs.logs.recover_log`)."""
        for log in self.layout.logs:
            recover_log(log, step)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Write ``manifest.json`` atomically; a resumed run keeps its first start's ``created`` and adds
        this start's time to ``resumed`` (:func:`opct.runs.manifest.keep_history`)."""
        write_json_atomic(self.layout.manifest, keep_history(self.layout.manifest, manifest) if self._resumed else manifest)

    def metrics_writer(self, enabled: bool, log_rollouts: bool) -> MetricsWriter:
        """The appender of each step's record and rollouts."""
        return MetricsWriter(self.layout, enabled, log_rollouts)

    def validation_writer(self, enabled: bool) -> JsonlAppender:
        """The appender of validation measurements (``validation.jsonl``)."""
        return JsonlAppender(self.layout.validation, enabled)

    def write_diagnostics(self, diagnostics: dict[str, Any]) -> None:
        """Write ``diagnostics.json`` (once-per-run measurements) atomically."""
        write_json_atomic(self.layout.diagnostics, diagnostics)

    def read_diagnostics(self) -> dict[str, Any] | None:
        """``diagnostics.json`` as written at the run's start, or ``None`` when it is missing or unreadable."""
        try:
            data = json.loads(self.layout.diagnostics.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    # -- checkpoints -----------------------------------------------------------------------------
    def save_checkpoint(
        self, acc: Accelerator, step: int, keep: int, model: torch.nn.Module, optimizer: Any, scheduler: Any,
        sharding: ShardedState | None = None,
    ) -> None:
        """Write ``checkpoints/step-<step>`` atomically and keep the newest ``keep``."""
        save_checkpoint(acc, self.layout, step, keep, model, optimizer, scheduler, sharding)

    @staticmethod
    def load_checkpoint(
        path: Path, model: torch.nn.Module, optimizer: Any, scheduler: Any, scaler: Any = None,
        sharding: ShardedState | None = None,
    ) -> int:
        """Load a verified checkpoint folder; returns its step."""
        return load_checkpoint(path, model, optimizer, scheduler, scaler, sharding)

    # -- the trained model -----------------------------------------------------------------------
    def save_final(self, acc: Accelerator, model: torch.nn.Module, tokenizer: Any, cfg: RunConfig,
                   identity: dict[str, Any]) -> Path:
        """Write ``final/`` atomically (:func:`opct.runs.final.save_final`)."""
        return save_final(acc, model, tokenizer, cfg, self.layout, identity)
