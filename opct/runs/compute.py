"""What a training run spent: tokens generated, scored by the teacher and backpropagated, and seconds.

Read from the run's ``metrics.jsonl`` (and, for BCT, its cached targets), so it is the same for a
finished run, a resumed one and a selection candidate read at one of its checkpoints.
"""

from __future__ import annotations

import json
from pathlib import Path

from opct.runs.layout import RunLayout


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_compute(run_dir: str | Path, step: int | None = None) -> dict[str, float]:
    """Compute a run spent up to ``step`` (default: every step it logged): ``tokens_generated``,
    ``tokens_teacher_scored``, ``tokens_backpropagated`` and ``train_seconds`` (optimizer steps only).

    OPCT generates, teacher-scores and trains on the same completion tokens. BCT generates its targets
    once, up front (every cached target counts, whatever ``step``), trains on them, and has no teacher
    pass during training."""
    layout = RunLayout(Path(run_dir))
    rows = [r for r in _jsonl(layout.metrics) if step is None or r["step"] <= step]
    method = json.loads(layout.manifest.read_text(encoding="utf-8"))["method"]
    trained = sum(r["completion_tokens"] for r in rows)
    if method == "bct":
        cached = list(layout.cache("bct").glob("*.jsonl"))
        generated = sum(len(t) for f in cached for row in _jsonl(f) for t in row["targets"])
        scored = 0
    else:
        generated = scored = trained
    return {"tokens_generated": generated, "tokens_teacher_scored": scored, "tokens_backpropagated": trained,
            "train_seconds": round(sum(r["step_time_s"] for r in rows), 1)}
