"""What a rerun of an experiment redoes: the stages whose inputs changed, by content, and those ``--force`` names.

* **Training.** A run directory that holds a run of other settings (any key but where it lives, its CPU
  threads and what a resume accepts: more steps, checkpointing, logging) or of other training pairs (their
  content hash, compared when ``data.too_long`` is ``error``) is trained again from scratch. The old run
  is never deleted: it is moved to ``<experiment>/replaced/<key>-<n>/`` (the log line says where). A run
  of the same settings is skipped when finished and resumed otherwise.
* **Evals and attacks** are keyed by the sha256 of the weights they measured and by their settings: a
  retrained model's are measured again, an unchanged model's are reused (``discard_stale``).
* ``--force STAGE`` redoes one anyway: ``train`` or ``train:KEY`` (trained again from scratch, the old run
  set aside as above), ``eval`` / ``eval:KEY`` and ``attack`` / ``attack:KEY`` (their results deleted and
  measured again). ``KEY`` is a row of the plan (``base``, ``bct``, ``opct``, a variant, ``opct-s1``...).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.config import ConfigError, RunConfig
from opct.errors import read_json
from opct.runs.errors import RunDirError
from opct.runs.experiment_layout import ExperimentLayout
from opct.runs.identity import run_setting_changes
from opct.runs.layout import RunLayout
from opct.runs.manifest import hash_records

#: The stages ``--force`` can name.
STAGES = ("train", "eval", "attack")
@dataclass(frozen=True)
class Force:
    """One ``--force STAGE[:KEY]``: ``key`` None forces the stage for every model."""

    stage: str
    key: str | None = None

    def covers(self, stage: str, key: str) -> bool:
        """Whether this forces ``stage`` of ``key``."""
        return self.stage == stage and self.key in (None, key)


def parse_force(items: Sequence[str], keys: dict[str, list[str]]) -> list[Force]:
    """``--force`` arguments as :class:`Force` s; ``keys`` are each stage's plan keys. A stage or key the
    experiment does not have is a :class:`ConfigError` naming the argument and what it could be."""
    out = []
    for item in items:
        stage, _, key = item.partition(":")
        if stage not in STAGES:
            raise ConfigError(f"--force {item!r}: unknown stage {stage!r}; use train, eval or attack, "
                              "optionally with a model's key (e.g. --force train:opct, --force eval:bct)")
        if not keys.get(stage):
            raise ConfigError(f"--force {item!r}: this experiment has no {stage} stage")
        if key and key not in keys[stage]:
            raise ConfigError(f"--force {item!r}: this experiment has no {stage} stage for {key!r}; its {stage} "
                              f"stages are for: {', '.join(keys[stage])}")
        out.append(Force(stage, key or None))
    return out


def forced(forces: Sequence[Force], stage: str, key: str) -> bool:
    """Whether one of ``forces`` names ``stage`` of ``key``."""
    return any(f.covers(stage, key) for f in forces)


def retrain_reason(run: RunConfig) -> str | None:
    """Why the run directory of ``run`` holds a run of other inputs (the settings that differ, or the
    training pairs), so that it must be trained again from scratch; None when there is no run there yet,
    or when it may be skipped or resumed (only settings a resume accepts differ)."""
    # deferred: loads accelerate and torch only when called
    from opct.runs.resume import RESUMABLE_CHANGES

    # deferred: loads torch only when called
    from opct.training.batches import load_training_pairs

    layout = RunLayout(run.run_dir)
    if not layout.manifest.exists():
        return None
    try:
        old = json.loads(layout.manifest.read_text(encoding="utf-8"))
        changed = run_setting_changes(old["config"], run, ignore=RESUMABLE_CHANGES)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        return f"its manifest is unreadable ({type(err).__name__})"
    if changed:
        return f"its settings changed: {', '.join(changed)}"
    pairs_hash = old.get("data_hash")
    if run.data.too_long == "error" and pairs_hash and hash_records([p.to_dict() for p in load_training_pairs(run)]) != pairs_hash:
        return "its training pairs changed (content hash)"
    return None


def set_aside(run_dir: Path, root: Path) -> Path:
    """Move the run in ``run_dir`` to ``<root>/replaced/<name>-<n>/`` (the first free ``n``); returns where."""
    folder = ExperimentLayout(root).replaced
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while (folder / f"{run_dir.name}-{n}").exists():
        n += 1
    target = folder / f"{run_dir.name}-{n}"
    shutil.move(str(run_dir), str(target))
    return target


def clear(folder: Path) -> bool:
    """Delete a forced eval's or attack's results (``folder``); returns whether there was anything."""
    if not folder.exists():
        return False
    shutil.rmtree(folder)
    return True


def train_stage(key: str, run: RunConfig, root: Path, force: bool, show_progress: bool, log: Any) -> None:
    """Train one run of the plan: from scratch when forced or when its directory holds a run of other
    inputs (that run moved to ``<root>/replaced/``), skipped when finished with these settings, else
    trained or resumed."""
    # deferred: loads accelerate, torch and transformers only when called
    from opct.training.loop import train

    run_dir = run.run_dir
    why = "forced (--force)" if force else retrain_reason(run)
    if why and run_dir.exists():
        kept = set_aside(run_dir, root)
        log(f"[stage] train {key}: trained again from scratch, {why}; the old run is kept in {kept}")
    if _finished(run):
        log(f"[stage] train {key}: complete, skipped")
        return
    log(f"[stage] train {key}")
    try:
        train(run, show_progress=show_progress)
    except RunDirError as err:  # its advice names train settings an experiment does not expose
        raise RunDirError(f"{err}\nIn this experiment: `opct run FILE --force train:{key}` trains it again from "
                          f"scratch (the old run is kept in {ExperimentLayout(root).replaced}).") from err


def already_trained(run: RunConfig, force: bool = False) -> bool:
    """Whether :func:`train_stage` skips ``run``: not forced, no reason to train it again
    (:func:`retrain_reason`), and finished with these settings (:func:`run_complete`). ``opct run --jobs``
    and ``opct-lab select --jobs`` ask this before they start a worker, so a resume starts none for it."""
    return not force and _finished(run) and retrain_reason(run) is None  # the cheap file checks first


def _finished(run: RunConfig) -> bool:
    """The run's final checkpoint is there and its manifest records these settings at its last step."""
    return RunLayout(run.run_dir).final.exists() and run_complete(run)


def run_complete(run: RunConfig) -> bool:
    """A finished run whose manifest records these settings (defaults filled as a resume fills them)."""
    # deferred: loads accelerate, torch and transformers only when called
    from opct.training.loop import total_steps

    layout = RunLayout(run.run_dir)
    if not layout.manifest.exists():
        return False
    old = read_json(layout.manifest, f"delete {run.run_dir} to train that run again")
    if not isinstance(old, dict) or not isinstance(old.get("config"), dict) or run_setting_changes(old["config"], run):
        return False
    found = layout.list_checkpoints()
    return bool(found) and found[-1][0] >= total_steps(run, int(old.get("num_pairs", 0)) or 1)
