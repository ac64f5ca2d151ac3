"""Where everything is inside a training run's directory: the one place that names its files.

::

    <run>/
      manifest.json          what was run (config, versions, data and weight hashes, seeds)
      metrics.jsonl          one record per optimizer step
      rollouts.jsonl.gz      the sampled rollouts, one gzip member per step (when logged)
      validation.jsonl       one record per validation measurement (validation.every)
      diagnostics.json       once-per-run measurements: the off-policy profile at the run's start
      <method>_targets/      a method's cached offline data (BCT's targets)
      checkpoints/step-N/    hashed safetensors and JSON (:mod:`opct.runs.checkpoint`)
      validation_attack/step-N/  recipe selection's attack on that checkpoint's validation behaviours
      final/                 the trained model, loadable with ``from_pretrained`` (:mod:`opct.runs.final`)
      trackers/              TensorBoard / W&B files, when configured
      .lock                  held by the one process that trains here (:mod:`opct.runs.lock`)

Every other module asks a :class:`RunLayout` for a path instead of joining names onto the directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The file a trained model folder describes itself in (``final/`` and an export's folder).
CHECKPOINT_FILE = "opct_checkpoint.json"
_STEP_PREFIX = "step-"


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run directory (nothing is created or read here)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def rollouts(self) -> Path:
        return self.root / "rollouts.jsonl.gz"

    @property
    def validation(self) -> Path:
        return self.root / "validation.jsonl"

    @property
    def diagnostics(self) -> Path:
        return self.root / "diagnostics.json"

    def cache(self, method: str) -> Path:
        """The folder of a method's cached offline data (``<method>_targets/``)."""
        return self.root / f"{method}_targets"

    @property
    def logs(self) -> tuple[Path, Path, Path]:
        """The append-only logs, cut back on resume and removed when a run starts over."""
        return self.metrics, self.rollouts, self.validation

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def trackers(self) -> Path:
        return self.root / "trackers"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    def checkpoint(self, step: int) -> Path:
        """``checkpoints/step-<step>``."""
        return self.checkpoints / f"{_STEP_PREFIX}{step}"

    def checkpoint_tmp(self, step: int) -> Path:
        """Where step ``step``'s checkpoint is written before it is renamed into place."""
        return self.checkpoints / f"{_STEP_PREFIX}{step}.tmp"

    def validation_attack(self, step: int) -> Path:
        """``validation_attack/step-<step>``: recipe selection's adaptive attack on that checkpoint's
        validation behaviours (an attack output folder: results.json, attempts.jsonl)."""
        return self.root / "validation_attack" / f"{_STEP_PREFIX}{step}"

    @property
    def final(self) -> Path:
        return self.root / "final"

    @property
    def final_tmp(self) -> Path:
        return self.root / "final.tmp"

    @property
    def final_record(self) -> Path:
        """``final/opct_checkpoint.json``: what the trained model says about itself."""
        return self.final / CHECKPOINT_FILE

    def names(self, name: str) -> bool:
        """Whether ``name`` (an entry of the run's folder) is one this layout names (``bct_targets`` included)."""
        fixed = {p.name for p in (self.manifest, self.metrics, self.rollouts, self.validation, self.diagnostics,
                                  self.lock, self.trackers, self.checkpoints, self.final, self.final_tmp)}
        return name in fixed or name == "validation_attack" or name.endswith("_targets")

    def list_checkpoints(self) -> list[tuple[int, Path]]:
        """Every ``checkpoints/step-N`` folder, oldest first (valid or not)."""
        if not self.checkpoints.exists():
            return []
        found = [(step, d) for d in self.checkpoints.iterdir() if d.is_dir() and (step := checkpoint_step(d)) is not None]
        return sorted(found)


def checkpoint_step(folder: Path) -> int | None:
    """The step of a ``step-N`` checkpoint folder, or None for any other name."""
    name = Path(folder).name
    digits = name[len(_STEP_PREFIX):]
    return int(digits) if name.startswith(_STEP_PREFIX) and digits.isdigit() else None


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` looks like a training run's directory (it has a manifest)."""
    return RunLayout(path).manifest.is_file()


def layout_of(run: RunLayout | Path | str) -> RunLayout:
    """``run`` as a :class:`RunLayout` (a directory path is taken as the run's root)."""
    return run if isinstance(run, RunLayout) else RunLayout(Path(run))
