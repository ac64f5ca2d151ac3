"""Whether and how a run restarts in its directory: from scratch, from its newest checkpoint, or not at all.

Layout: ``manifest.json``, ``metrics.jsonl``, ``rollouts.jsonl.gz``, ``checkpoints/step-N/``
(:mod:`opct.runs.checkpoint`), ``final/`` (the model, loadable with ``from_pretrained``) and ``.lock``.

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

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.config import RunConfig
from opct.runs.checkpoint import newest_valid_checkpoint
from opct.runs.errors import RunDirError
from opct.runs.identity import run_setting_changes
from opct.runs.layout import RunLayout, layout_of

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
    "train.tracker_project",
    "train.tracker_entity",
    "train.tracker_tags",
    "train.log_rollouts",
}
STEP_KEYS = "train.max_steps/train.epochs"


def planned_steps(manifest: dict[str, Any]) -> int:
    """The number of steps a run was started (or last resumed) for, from its manifest."""
    if manifest.get("total_steps"):
        return int(manifest["total_steps"])
    train = manifest["config"]["train"]  # a manifest written before total_steps was recorded
    if train.get("max_steps") is not None:
        return int(train["max_steps"])
    return max(1, math.ceil(train["epochs"] * int(manifest["num_pairs"]) / train["pairs_per_step"]))


def check_resumable(
    run: RunLayout | Path, cfg: RunConfig, teacher_fingerprint: str, data_hash: str, done: int, steps: int
) -> bool:
    """Check that the run in ``run_dir``, ``done`` steps in, may continue to ``steps`` steps with ``cfg``
    (the rules are in this module's docstring); raises :class:`RunDirError` naming what differs.
    Returns True when the run is finished and these are its own settings: there is nothing to record."""
    layout = layout_of(run)
    run_dir = layout.root
    try:
        old = json.loads(layout.manifest.read_text(encoding="utf-8"))
        recorded = old["config"]
        planned = planned_steps(old)
        changed = run_setting_changes(recorded, cfg)  # a key recorded before it existed is read at its default
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:  # cut, garbled, or not a manifest
        raise RunDirError(f"{layout.manifest} is unreadable ({type(err).__name__}: {err}); restore it from a copy, "
                          f"or delete {run_dir} to start over.") from err
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


@dataclass
class ResumePoint:
    """Where a (re)started run begins: ``checkpoint`` None starts from scratch; ``finished`` means the
    checkpoint already holds every step these (unchanged) settings ask for, so nothing new is recorded."""

    checkpoint: Path | None
    step: int
    finished: bool


def resume_point(run: RunLayout | Path, cfg: RunConfig, teacher_fingerprint: str, data_hash: str, steps: int) -> ResumePoint:
    """Decide how a run starts in ``run_dir`` for ``steps`` total steps (see :func:`opct.runs.resume.check_resumable`).

    A directory without a checkpoint starts over, whatever its manifest says (nothing of it is kept).
    """
    layout = layout_of(run)
    found = newest_valid_checkpoint(layout)
    if found is None:
        return ResumePoint(None, 0, False)
    if not layout.manifest.exists():
        raise RunDirError(
            f"{layout.root} has checkpoints but no {layout.manifest.name}; delete {layout.checkpoints} to start over"
        )
    step, path = found
    finished = check_resumable(layout, cfg, teacher_fingerprint, data_hash, done=step, steps=steps)
    return ResumePoint(path, step, finished)
