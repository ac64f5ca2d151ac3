"""The evaluation item type shared by every benchmark loader, plus small I/O helpers.

An :class:`EvalItem` is deliberately plain: an id, the chat messages to send to the model and a
``meta`` dict holding whatever the grader needs (gold answer, options, subject...). Everything in it
is JSON-serialisable so items can be written to and read back from JSONL unchanged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opct.datasets.errors import DatasetFormatError
from opct.datasets.tabular import iter_rows

__all__ = [
    "DatasetFormatError",
    "EvalItem",
    "read_eval_items",
    "shared_data_dir",
    "user_message",
    "write_eval_items",
]


@dataclass
class EvalItem:
    """One evaluation prompt.

    ``id`` is unique within its benchmark, ``prompt`` is a list of chat messages
    (``{"role": ..., "content": ...}``) and ``meta`` holds the grading information, e.g.
    ``{"answer": "B", "options": [...], "subject": ...}`` for multiple choice.
    """

    id: str
    prompt: list[dict[str, str]]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (``id``, ``prompt``, ``meta``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalItem:
        """Inverse of :meth:`to_dict`."""
        return cls(id=str(data["id"]), prompt=list(data["prompt"]), meta=dict(data.get("meta") or {}))

    @property
    def user_text(self) -> str:
        """Content of the last user message (the question as shown to the model)."""
        for message in reversed(self.prompt):
            if message.get("role") == "user":
                return message.get("content", "")
        return ""


def user_message(text: str) -> list[dict[str, str]]:
    """Wrap ``text`` as a single-turn chat prompt."""
    return [{"role": "user", "content": text}]


def write_eval_items(items: Iterable[EvalItem], path: str | os.PathLike[str]) -> int:
    """Write items as JSONL (one :meth:`EvalItem.to_dict` per line); return how many were written."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")
            n += 1
    return n


def read_eval_items(path: str | os.PathLike[str]) -> Iterator[EvalItem]:
    """Read items written by :func:`write_eval_items`; malformed lines raise :class:`DatasetFormatError`."""
    if not Path(path).exists():
        raise FileNotFoundError(f"no such file: {path}")
    for row in iter_rows(path, "jsonl"):
        for key in ("id", "prompt"):
            if key not in row.values:
                raise DatasetFormatError.at(path, row, "missing required key", field=key,
                                            hint="write items with write_eval_items")
        yield EvalItem.from_dict(row.values)


def shared_data_dir() -> Path:
    """Where the (non-project) reference benchmark folders live.

    ``$OPCT_SHARED_DATA`` if set, else ``<repo>/../shared/data``. The folder may not exist.
    """
    env = os.environ.get("OPCT_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"
