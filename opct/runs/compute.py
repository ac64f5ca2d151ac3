"""What a training run spent: tokens generated, scored by the teacher and backpropagated, and seconds.

Read from the run's ``metrics.jsonl`` (and, for a method that generates its targets once, its cached
targets), so it is the same for a finished run, a resumed one and a selection candidate read at one of
its checkpoints. How a method spends them is its own declaration (``Method.compute``: what it generates
and what the teacher scores), recorded in the run manifest's ``compute``; for a manifest written before
that field existed, the caller says what the method declares (``declared``, e.g.
:func:`opct.methods.declared_compute`), so this package never names a method.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from opct.errors import read_json
from opct.runs.layout import RunLayout

#: A method that samples, teacher-scores and trains on the same tokens (the default).
ON_POLICY = {"generated": "trained", "teacher_scored": "trained"}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_compute(run_dir: str | Path, step: int | None = None, *,
                declared: Callable[[str], Mapping[str, str] | None] | None = None) -> dict[str, float]:
    """Compute a run spent up to ``step`` (default: every step it logged): ``tokens_generated``,
    ``tokens_teacher_scored``, ``tokens_backpropagated`` and ``train_seconds`` (optimizer steps only).

    The manifest's ``compute`` says, per kind, which tokens count: ``trained`` (the tokens each step
    trains on: OPCT generates, teacher-scores and trains on the same completion tokens), ``cached`` (the
    targets generated once, up front, into the run's cache of the method's name: every cached target
    counts, whatever ``step``: BCT) or ``none`` (BCT has no teacher pass during training, ACT generates
    nothing). A manifest without ``compute`` is read as ``declared(method)`` says, else as on-policy."""
    layout = RunLayout(Path(run_dir))
    rows = [r for r in _jsonl(layout.metrics) if step is None or r["step"] <= step]
    manifest = read_json(layout.manifest, f"the run's record is lost: train {run_dir} again")
    profile = manifest.get("compute") or (declared and declared(manifest["method"])) or ON_POLICY
    trained = sum(r["completion_tokens"] for r in rows)

    def count(kind: str) -> float:
        if kind == "trained":
            return trained
        if kind == "cached":
            cached = list(layout.cache(manifest["method"]).glob("*.jsonl"))
            return sum(len(t) for f in cached for row in _jsonl(f) for t in row["targets"])
        if kind == "none":
            return 0
        raise ValueError(f"{layout.manifest}: unknown compute kind {kind!r} (trained, cached or none)")

    generated, scored = count(profile["generated"]), count(profile["teacher_scored"])
    return {"tokens_generated": generated, "tokens_teacher_scored": scored, "tokens_backpropagated": trained,
            "train_seconds": round(sum(r["step_time_s"] for r in rows), 1)}
