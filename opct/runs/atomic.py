"""Files written whole or not at all (a temporary file beside the target, then a rename), and read back."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from opct.errors import redact_secrets


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename (never half-written); a URL's
    password in it is written as ``***`` (:func:`opct.errors.redact_secrets`: a state file, a manifest or a
    report never holds a credential)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    text = redact_secrets(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it is missing, unreadable, not JSON or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def finite_or_null(data: Any) -> Any:
    """``data`` with every float that is not finite (NaN, ±inf: "not measured") as ``None``, so that the
    JSON it is written as is strict (``null``) and parses with any reader."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: finite_or_null(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite_or_null(v) for v in data]
    return data
