"""Read table-like benchmark data row by row: CSV, JSONL, JSON (list of objects), parquet, a
Hugging Face ``save_to_disk`` folder, or a hub id (``owner/name[:config][@revision][#split]``, see
:mod:`opct.datasets.sources`).

Each row comes with a human-oriented position (CSV and JSONL: the 1-based line number in the file;
parquet, JSON, HF folders and hub data sets: the 0-based row index) so that loaders can report exactly
where a bad value sits; :func:`require_columns` names a missing column and the expected ones.
"""

from __future__ import annotations

import ast
import csv
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.datasets.errors import DatasetFormatError
from opct.datasets.sources import SOURCE_FORMS, HubSpec, load_hub, parse_hub_spec
from opct.errors import require_extra

__all__ = ["FORMATS", "Row", "decoded_cell", "detect_format", "iter_rows", "require_columns"]

FORMATS = ("csv", "jsonl", "json", "parquet", "hf_disk")


@dataclass(frozen=True)
class Row:
    """One record: ``values`` by column, ``position`` (line number or row index) and its ``kind``."""

    values: dict[str, Any]
    position: int
    kind: str  # "line" or "row"


def detect_format(path: str | os.PathLike[str]) -> str:
    """Guess the format from the path: a directory is an HF disk folder, else the file suffix."""
    p = Path(path)
    if p.is_dir():
        return "hf_disk"
    suffix = p.suffix.lower()
    mapping = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json",
               ".parquet": "parquet", ".pq": "parquet"}
    if suffix not in mapping:
        raise DatasetFormatError(path, f"cannot tell the format from suffix {suffix!r}",
                                 hint=f"give {SOURCE_FORMS}; or pass fmt= one of {', '.join(FORMATS)}")
    return mapping[suffix]


def iter_rows(path: str | os.PathLike[str], fmt: str | None = None, split: str | None = None) -> Iterator[Row]:
    """Yield the rows of ``path`` as :class:`Row` objects.

    ``fmt`` is one of :data:`FORMATS` (guessed by :func:`detect_format` when None); ``split`` picks a
    split of an HF ``DatasetDict`` folder or hub data set. A ``path`` that is a hub id
    (:func:`opct.datasets.sources.parse_hub_spec`) is loaded with ``datasets.load_dataset``.
    """
    spec = parse_hub_spec(path) if fmt is None else None
    if spec is not None:
        yield from _iter_hub(spec, split)
        return
    p = Path(path)
    if not p.exists():
        raise DatasetFormatError(path, "no such file or folder", hint=f"check the path; give {SOURCE_FORMS}")
    fmt = fmt or detect_format(p)
    if fmt == "csv":
        yield from _iter_csv(p)
    elif fmt == "jsonl":
        yield from _iter_jsonl(p)
    elif fmt == "json":
        yield from _iter_json(p)
    elif fmt == "parquet":
        yield from _iter_parquet(p)
    elif fmt == "hf_disk":
        yield from _iter_hf_disk(p, split)
    else:
        raise DatasetFormatError(path, f"unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")


def decoded_cell(path: str | os.PathLike[str], row: Row, field: str, problem: str, *,
                 python_literal: bool = False, hint: str | None = None) -> Any:
    """``row.values[field]`` (``None`` when absent), JSON-decoded when it is a string (CSV and parquet
    files often hold lists as text); with ``python_literal``, ``"['a', 'b']"`` is accepted too.

    A string that does not decode raises :class:`DatasetFormatError` with ``problem`` and ``hint``.
    """
    raw = row.values.get(field)
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        if python_literal:
            try:
                return ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                pass
    raise DatasetFormatError.at(path, row, problem, field=field, hint=hint)


def _iter_csv(p: Path) -> Iterator[Row]:
    delimiter = "\t" if p.suffix.lower() == ".tsv" else ","
    with open(p, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter=delimiter)
        if reader.fieldnames is None:
            raise DatasetFormatError(p, "empty file, expected a header line", row=1, row_kind="line")
        header = list(reader.fieldnames)
        start_line = reader.line_num + 1
        for record in reader:
            line = start_line
            start_line = reader.line_num + 1
            if None in record:  # more cells than header columns
                raise DatasetFormatError(p, f"row has more cells than the {len(header)} header columns",
                                         row=line, row_kind="line", hint="quote cells containing commas")
            if any(v is None for v in record.values()):
                missing = [k for k, v in record.items() if v is None]
                raise DatasetFormatError(p, "row has fewer cells than the header", row=line,
                                         field=missing[0], row_kind="line")
            yield Row(dict(record), line, "line")


def _iter_jsonl(p: Path) -> Iterator[Row]:
    with open(p, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DatasetFormatError(p, "not UTF-8 text, so not JSONL", row=lineno, row_kind="line",
                                         hint=f"is it another format? give {SOURCE_FORMS}") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetFormatError(p, f"invalid JSON ({exc.msg} at column {exc.colno})", row=lineno,
                                         row_kind="line", hint="each line must be one JSON object") from None
            if not isinstance(record, dict):
                raise DatasetFormatError(p, f"expected a JSON object, got {type(record).__name__}",
                                         row=lineno, row_kind="line")
            yield Row(record, lineno, "line")


def _iter_json(p: Path) -> Iterator[Row]:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetFormatError(p, f"invalid JSON ({exc.msg})", row=exc.lineno, row_kind="line") from None
    if not isinstance(data, list):
        raise DatasetFormatError(p, "expected a JSON list of objects", hint="or use JSONL")
    for i, record in enumerate(data):
        if not isinstance(record, dict):
            raise DatasetFormatError(p, f"expected an object, got {type(record).__name__}", row=i)
        yield Row(record, i, "row")


def _iter_parquet(p: Path) -> Iterator[Row]:
    pq = require_extra("pyarrow.parquet", "data", f"reading the parquet file {p}")
    try:
        table = pq.read_table(p)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise DatasetFormatError(p, f"cannot read parquet: {exc}") from None
    for i, record in enumerate(table.to_pylist()):
        yield Row(record, i, "row")


def _iter_hf_disk(p: Path, split: str | None) -> Iterator[Row]:
    datasets = require_extra("datasets", "data", f"reading the datasets.save_to_disk folder {p}")
    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as exc:
        raise DatasetFormatError(p, f"not a datasets.save_to_disk folder: {exc}",
                                 hint=f"give {SOURCE_FORMS}") from None
    for i, record in enumerate(_one_split(p, ds, split, "pass split=")):
        yield Row(dict(record), i, "row")


def _iter_hub(spec: HubSpec, split: str | None) -> Iterator[Row]:
    ds = load_hub(spec)
    hint = f"name one: {spec.repo}{':' + spec.config if spec.config else ''}{'@' + spec.revision if spec.revision else ''}#<split>"
    for i, record in enumerate(_one_split(spec, ds, split or spec.split, hint)):
        yield Row(dict(record), i, "row")


def _one_split(where: object, ds: Any, split: str | None, hint: str) -> Any:
    """``ds`` itself, or its ``split`` (or its only split) when it is a ``DatasetDict``."""
    from datasets import DatasetDict

    if not isinstance(ds, DatasetDict):
        return ds
    if split is None:
        if len(ds) != 1:
            raise DatasetFormatError(str(where), f"holds splits {sorted(ds)}", hint=hint)
        split = next(iter(ds))
    if split not in ds:
        raise DatasetFormatError(str(where), f"no split {split!r}; have {sorted(ds)}")
    return ds[split]


def require_columns(path: object, row: Row, required: Sequence[str | Sequence[str]],
                    expected: str) -> None:
    """Raise :class:`DatasetFormatError` unless ``row`` has every column of ``required``.

    An entry of ``required`` is a column name or a tuple of alternatives (any one will do). The error
    names the file, the missing column, ``expected`` (the columns a good file has) and the columns found.
    """
    for need in required:
        names = (need,) if isinstance(need, str) else tuple(need)
        if not any(name in row.values for name in names):
            missing = " or ".join(repr(n) for n in names)
            raise DatasetFormatError(str(path), f"missing column {missing}", field=names[0],
                                     hint=f"expected columns: {expected}; found: {', '.join(sorted(row.values)) or 'none'}")
