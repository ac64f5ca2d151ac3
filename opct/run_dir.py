"""A training run's directory: its manifest check, lock, logs and final model.

Layout: ``manifest.json``, ``metrics.jsonl``, ``rollouts.jsonl.gz``, ``checkpoints/step-N/``
(:mod:`opct.checkpoint`), ``final/`` (the model, loadable with ``from_pretrained``) and ``.lock``.

Rerunning a run in its directory:

* with no checkpoint yet (it failed or was stopped before its first one), it starts over, with
  whatever configuration it is given now;
* otherwise it resumes from the newest valid checkpoint, and its configuration may differ from the
  run's only in :data:`RESUMABLE_CHANGES`. The number of steps (``train.max_steps``/``train.epochs``) may
  grow, on an unfinished or a finished run, when the learning-rate schedule does not depend on it
  (``optim.schedule: constant``): the run then ends exactly as an uninterrupted run of the new length.
  It may never drop below the steps already done, and with a ``linear`` or ``cosine`` schedule it may
  not change at all (steps 1..N would have had other learning rates);
* a finished run asked for no more steps is left as it is: the same settings rebuild ``final/`` and
  record nothing new; any other setting is refused, naming the keys. A refused rerun writes nothing.

Only one process trains in a run directory at a time: it holds an ``flock`` on ``.lock`` (which holds
its pid), and the kernel drops that lock when the process ends, however it ends.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import math
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch
from accelerate import Accelerator

from opct.config import RunConfig, dump_config
from opct.errors import FAULT, OpctError
from opct.model_card import loadable_base, write_final_files

#: Settings that never make another run: where it lives, and how many CPU threads compute it.
SAME_RUN_KEYS = {"output_dir", "threads"}

RESUMABLE_CHANGES = {
    "output_dir",
    "threads",
    "train.max_steps",
    "train.epochs",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.trackers",
    "train.log_rollouts",
}
STEP_KEYS = "train.max_steps/train.epochs"
LOCK = ".lock"
T = TypeVar("T")


class RunDirError(OpctError, RuntimeError):
    """The run directory cannot be used as asked (different config, different teacher...)."""


class CheckpointError(RunDirError):
    """A checkpoint cannot be resumed from: damaged, or not written for this model and optimizer."""

    exit_code = FAULT


class RunLockedError(RunDirError):
    """Another process is training in the run directory."""


class RunDirWarning(UserWarning):
    """Part of a run directory was damaged and skipped or cut back (a checkpoint, a log's tail)."""


def _default_settings(cfg: RunConfig) -> dict[str, Any]:
    """Every key of ``cfg``'s method at its default (dotted), or nothing if the method has no default config."""
    try:
        return flatten(dump_config(type(cfg).model_validate({"method": cfg.method})))
    except ValueError:
        return {}


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one dict with dotted keys."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def on_main(acc: Accelerator, fn: Callable[[], T]) -> T:
    """Run ``fn`` on the main process only and hand its result to every process; its
    :class:`RunDirError` (or ``OSError``/``ValueError``) is raised on every process."""
    result: Any = None
    error: BaseException | None = None
    if acc.is_main_process:
        try:
            result = fn()
        except (RunDirError, OSError, ValueError) as err:
            if acc.num_processes == 1:
                raise
            error = err
    if acc.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        box = [(result, error)]
        broadcast_object_list(box, from_process=0)
        result, error = box[0]
    if error is not None:
        raise error
    return result


def _try_lock(path: Path) -> tuple[int | None, str | None]:
    """``(fd, None)`` holding the lock, or ``(None, "pid N ...")`` naming its holder."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
        os.close(fd)
        pid = holder[0] if holder else "unknown"
        host = f" on {holder[1]}" if len(holder) > 1 and holder[1] != socket.gethostname() else ""
        return None, f"pid {pid}{host}"
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    return fd, None


@contextmanager
def run_lock(run_dir: Path, acc: Accelerator) -> Iterator[None]:
    """Hold ``run_dir/.lock`` while training; if another process holds it, raise :class:`RunLockedError`
    naming its pid. The lock is an ``flock``: a ``.lock`` left by a process that died holds nothing."""
    fd: int | None = None

    def take() -> str | None:
        nonlocal fd
        run_dir.mkdir(parents=True, exist_ok=True)
        fd, holder = _try_lock(run_dir / LOCK)
        return holder

    holder = on_main(acc, take)
    if holder is not None:
        raise RunLockedError(
            f"{run_dir} is in use by another training ({holder} holds {run_dir / LOCK}); "
            "wait for it to end, or stop it, then rerun."
        )
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def planned_steps(manifest: dict[str, Any]) -> int:
    """The number of steps a run was started (or last resumed) for, from its manifest."""
    if manifest.get("total_steps"):
        return int(manifest["total_steps"])
    train = manifest["config"]["train"]  # a manifest written before total_steps was recorded
    if train.get("max_steps") is not None:
        return int(train["max_steps"])
    return max(1, math.ceil(train["epochs"] * int(manifest["num_pairs"]) / train["pairs_per_step"]))


def check_resumable(
    run_dir: Path, cfg: RunConfig, teacher_fingerprint: str, data_hash: str, done: int, steps: int
) -> bool:
    """Check that the run in ``run_dir``, ``done`` steps in, may continue to ``steps`` steps with ``cfg``
    (the rules are in this module's docstring); raises :class:`RunDirError` naming what differs.
    Returns True when the run is finished and these are its own settings: there is nothing to record."""
    try:
        old = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        before, now = flatten(old["config"]), flatten(dump_config(cfg))
        planned = planned_steps(old)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise RunDirError(f"{run_dir / 'manifest.json'} is unreadable ({err}); delete {run_dir} to start over.") from err
    # a key the run's opct did not have yet is no change when it is at its default (the old behaviour)
    defaults = _default_settings(cfg)
    before = {**{k: defaults[k] for k in now if k not in before and k in defaults}, **before}
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    differ = [k for k in changed if k not in SAME_RUN_KEYS]  # a moved directory, other threads: the same run
    if done >= planned and steps == done and differ:
        raise RunDirError(
            f"{run_dir} holds a finished run ({done} steps) and these settings differ from its own: "
            f"{', '.join(differ)}. A finished run is never changed: use another train name/output_dir, "
            "or delete the directory to train again."
        )
    fixed = [k for k in changed if k not in RESUMABLE_CHANGES]
    if fixed:
        raise RunDirError(
            f"{run_dir} holds a run with a different configuration ({', '.join(fixed)}). "
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
    if steps < done:
        raise RunDirError(
            f"{run_dir} has already trained {done} steps and these settings ask for {steps} ({STEP_KEYS}). "
            f"Steps cannot be undone: ask for {done} or more, or use another train name/output_dir."
        )
    if steps != planned and cfg.optim.schedule != "constant":
        raise RunDirError(
            f"{run_dir} was planned for {planned} steps and these settings ask for {steps} ({STEP_KEYS}), but its "
            f"{cfg.optim.schedule!r} learning-rate schedule (optim.schedule) depends on the number of steps, so the "
            f"run would match no uninterrupted run. Keep {planned} steps, or train a new run."
        )
    return done >= steps and not differ


def save_final(
    acc: Accelerator, model: torch.nn.Module, tokenizer: Any, cfg: RunConfig, run_dir: Path, identity: dict[str, Any]
) -> Path:
    """Write ``final/`` atomically: weights (the adapter under LoRA), tokenizer, ``opct_checkpoint.json``
    and the model card (:mod:`opct.model_card`; ``identity``: ``base_weights``, ``data_hash``, ``num_pairs``).

    An adapter's ``adapter_config.json`` names its base as :func:`~opct.model_card.loadable_base` does (an
    alias's folder, a local base by its absolute path), so PEFT's and transformers' adapter loaders find
    the base from any working directory."""
    final, tmp = run_dir / "final", run_dir / "final.tmp"
    acc.wait_for_everyone()
    state = acc.get_state_dict(model)
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        unwrapped = acc.unwrap_model(model)
        for adapter in getattr(unwrapped, "peft_config", {}).values():
            adapter.base_model_name_or_path = loadable_base(cfg.model.name_or_path)
        unwrapped.save_pretrained(tmp, state_dict=state)
        tokenizer.save_pretrained(tmp)
        write_final_files(tmp, cfg, **identity)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    acc.wait_for_everyone()
    return final


class MetricsWriter:
    """Appends each step's record to ``metrics.jsonl`` and its rollouts (one gzip member per step) to
    ``rollouts.jsonl.gz``; :func:`opct.run_logs.recover_log` repairs a tail cut by a kill."""

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
