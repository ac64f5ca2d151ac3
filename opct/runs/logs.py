"""Repairing a run's append-only logs on resume.

``metrics.jsonl`` gets one line per step and ``rollouts.jsonl.gz`` one gzip member per step. A kill
in the middle of an append leaves a partial last line or a cut-off gzip member; :func:`recover_log`
keeps the complete records up to the first damaged one, drops the records of steps after the
checkpoint the run resumes from, rewrites the file atomically, and warns saying what it dropped.
"""

from __future__ import annotations

import gzip
import json
import warnings
import zlib
from pathlib import Path
from typing import Any

from opct.runs.errors import RunDirWarning
from opct.runs.layout import RunLayout, layout_of

Record = tuple[bytes, dict[str, Any]]


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:  # also UnicodeDecodeError
        return None
    return record if isinstance(record, dict) else None


def _count(data: bytes) -> int:
    """Records (complete lines, and a last partial one) in a piece of a log."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def read_jsonl(data: bytes) -> tuple[list[Record], str | None]:
    """The complete records of a JSON-lines log, and what was dropped after them (None: nothing)."""
    records: list[Record] = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            return records, f"dropped 1 incomplete record ({len(data) - pos} bytes) at its end"
        record = _parse(data[pos:end])
        if record is None:
            rest = data[pos:]
            return records, f"dropped {_count(rest)} records from line {len(records) + 1} on, the first unreadable one"
        records.append((data[pos : end + 1], record))
        pos = end + 1
    return records, None


def read_gzip_jsonl(data: bytes) -> tuple[list[Record], str | None]:
    """The records of the complete gzip members of a log, and what was dropped after them."""
    records: list[Record] = []
    pos = 0
    while pos < len(data):
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # one gzip member, CRC checked at its end
        tail = len(data) - pos
        try:
            text = inflater.decompress(data[pos:])
        except zlib.error as err:
            return records, f"dropped an unreadable gzip member ({tail} bytes from byte {pos}: {err})"
        if not inflater.eof:
            return records, f"dropped an incomplete gzip member ({tail} bytes, {_count(text)} records readable in it) at its end"
        member, bad = read_jsonl(text)
        if bad is not None:
            return records, f"dropped a gzip member at byte {pos} with a damaged record ({bad}) and everything after it"
        records.extend(member)
        pos += tail - len(inflater.unused_data)
    return records, None


def recover_log(path: Path, last_step: int) -> int:
    """Cut the log at ``path`` (``.jsonl`` or ``.jsonl.gz``) back to its complete records of steps
    ``<= last_step``; warns (:class:`RunDirWarning`) when damage was dropped. Returns the number of
    records kept."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    gz = path.name.endswith(".gz")
    records, damage = (read_gzip_jsonl if gz else read_jsonl)(data)
    kept = [(line, record) for line, record in records if record.get("step", 0) <= last_step]
    keep = [line for line, _ in kept]
    if damage is not None:
        steps = sorted({record.get("step", 0) for _, record in kept})
        have = f"its records now end at step {steps[-1]}" if steps else "it now holds no record"
        warnings.warn(
            f"{path}: {damage}, likely cut by an interrupted write; {have} (the run resumes after step {last_step})",
            RunDirWarning,
            stacklevel=2,
        )
    if damage is None and len(keep) == len(records):
        return len(keep)
    body = b"".join(keep)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(body, mtime=0) if gz and body else body)
    tmp.replace(path)
    return len(keep)


class MetricsWriter:
    """Appends each step's record to ``metrics.jsonl`` and its rollouts (one gzip member per step) to
    ``rollouts.jsonl.gz``; :func:`opct.runs.logs.recover_log` repairs a tail cut by a kill."""

    def __init__(self, run: RunLayout | Path, enabled: bool, log_rollouts: bool):
        layout = layout_of(run)
        self.enabled = enabled
        self.metrics = layout.metrics
        self.rollouts = layout.rollouts if log_rollouts else None

    def write(self, record: dict[str, Any], rollouts: list[dict[str, Any]]) -> None:
        if not self.enabled:
            return
        with self.metrics.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.rollouts is not None and rollouts:
            with gzip.open(self.rollouts, "at", encoding="utf-8") as fh:
                for r in rollouts:
                    fh.write(json.dumps(r, ensure_ascii=False) + "\n")


class JsonlAppender:
    """Appends one JSON record per line to ``path`` (main process only; ``enabled`` False writes nothing)."""

    def __init__(self, path: Path, enabled: bool):
        self.path, self.enabled = path, enabled

    def write(self, record: dict[str, Any]) -> None:
        if self.enabled:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
