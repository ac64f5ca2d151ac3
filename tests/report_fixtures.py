"""Helpers that fabricate experiment folders for the report tests (study, ablation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write(path: Path, data: Any) -> None:
    """Write ``data`` as JSON, or as JSON lines when ``path`` ends in ``.jsonl``, creating the folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")


def metric(value: float, n: int, **extra: Any) -> dict[str, Any]:
    """A ``results.json`` metric record with a ±0.1 interval clipped to [0, 1]."""
    return {"value": value, "ci_low": max(0.0, value - 0.1), "ci_high": min(1.0, value + 0.1), "n": n, **extra}
