"""The errors of the data loaders: a malformed file (exit 2), data that cannot be fetched (exit 1)."""

from __future__ import annotations

import os
from typing import Any

from opct.errors import FAULT, OpctError


class DatasetFormatError(OpctError, ValueError):
    """A data file is malformed. The message names the file, the line/row (when known) and the field.

    ``row`` is a 1-based line number (``row_kind="line"``: CSV, JSONL, text) or a 0-based row index
    (``row_kind="row"``: JSON lists, parquet, HF folders); ``field`` the column or key at fault.
    The message reads ``"<path>, line 3, field 'answer': <problem> (<hint>)"``.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str, *, row: int | None = None,
                 field: str | None = None, hint: str | None = None, row_kind: str = "row") -> None:
        where = str(path)
        if row is not None:
            where += f", {row_kind} {row}"
        if field is not None:
            where += f", field {field!r}"
        message = f"{where}: {problem}"
        if hint:
            message += f" ({hint})"
        super().__init__(message)
        self.path = str(path)
        self.row = row
        self.row_kind = row_kind
        self.field = field
        self.problem = problem
        self.hint = hint

    @classmethod
    def at(cls, path: str | os.PathLike[str], row: Any, problem: str, *, field: str | None = None,
           hint: str | None = None) -> DatasetFormatError:
        """The error for one :class:`opct.datasets.tabular.Row` (its ``position`` and ``kind``)."""
        return cls(path, problem, row=row.position, field=field, hint=hint, row_kind=row.kind)


class DataFetchError(OpctError):
    """Data could not be fetched or did not verify: no network (or the hub switched off), a failed
    download, or a file whose hash differs from the pinned one. Exit code 1: the input was fine, the
    machine or the source was not."""

    exit_code = FAULT
