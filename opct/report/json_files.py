"""Reading an experiment's JSON and JSONL files leniently: what cannot be read becomes a warning, not an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json_object(path: Path, warnings: list[str]) -> dict[str, Any]:
    """The JSON object in ``path``, or ``{}`` with a line in ``warnings`` when it is unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        warnings.append(f"could not read {path}: {err}")
        return {}
    if not isinstance(data, dict):
        warnings.append(f"{path} is not a JSON object")
        return {}
    return data


def read_jsonl(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    """JSON objects, one a line; bad lines (e.g. a half-written last line) are skipped and counted."""
    rows, bad = read_jsonl_counted(path)
    if bad:
        warnings.append(f"{path}: skipped {bad} unreadable line(s)")
    return rows


def read_jsonl_counted(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of ``path``, one a line, and how many lines were not one."""
    rows, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


def subdirs(path: Path) -> list[Path]:
    """The folders directly in ``path``, sorted (none when it is not a folder)."""
    return sorted(p for p in path.iterdir() if p.is_dir()) if path.is_dir() else []

