"""IFEval (Zhou et al. 2023): 541 prompts, each with verifiable instructions.

Rows have ``key``, ``prompt``, ``instruction_id_list`` and ``kwargs`` (one entry per instruction).
A ``kwargs`` entry may be a dict (HF's struct column, where unused fields are ``None``), a JSON string
or a Python-literal string; all become plain dicts without ``None`` values. ``meta`` holds
``instruction_id_list`` and ``kwargs``; grade with :func:`opct.ifeval.evaluate_item`.
"""

from __future__ import annotations

import ast
import json
import os
from typing import Any

from opct.datasets.base import DatasetFormatError, EvalItem, shared_data_dir, user_message
from opct.datasets.tabular import decoded_cell, iter_rows, require_columns

__all__ = ["EXPECTED_COLUMNS", "load_ifeval", "parse_kwargs"]

#: What an IFEval file needs, for error messages (``google/IFEval`` has all four).
EXPECTED_COLUMNS = "prompt, instruction_id_list and kwargs (one entry per instruction), optional key"


def parse_kwargs(raw: Any) -> dict[str, Any]:
    """Turn one IFEval kwargs entry (dict, JSON string, Python-literal string or None) into a dict.

    ``None``-valued keys are dropped. Raises ``ValueError`` when a string is neither JSON nor a literal.
    """
    if raw is None:
        return {}
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}
        try:
            raw = json.loads(text)
        except json.JSONDecodeError:
            try:
                raw = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise ValueError(f"kwargs string is neither JSON nor a Python literal: {text[:80]!r}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"kwargs must be a mapping, got {type(raw).__name__}")
    return {str(k): v for k, v in raw.items() if v is not None}


def load_ifeval(
    path: str | os.PathLike[str] | None = None, *, fmt: str | None = None, split: str | None = None
) -> list[EvalItem]:
    """Load IFEval prompts (541 for the standard set) as :class:`EvalItem` objects.

    ``path`` defaults to ``shared_data_dir() / "ifeval"``; a JSONL, Parquet or CSV file, a
    ``save_to_disk`` folder or a hub id (``google/IFEval@<revision>``) works. Rows whose instruction
    list and kwargs list differ in length, or whose kwargs cannot be parsed, raise
    :class:`DatasetFormatError`.
    """
    path = path if path is not None else shared_data_dir() / "ifeval"
    items = []
    for index, row in enumerate(iter_rows(path, fmt, split)):
        v = row.values
        if index == 0:
            require_columns(path, row, ["prompt", "instruction_id_list"], EXPECTED_COLUMNS)

        def fail(field: str, problem: str, hint: str | None = None, row=row) -> None:
            raise DatasetFormatError.at(path, row, problem, field=field, hint=hint)

        prompt = v.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            fail("prompt", "missing or empty")
        ids = decoded_cell(path, row, "instruction_id_list", "string is not a JSON list")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            fail("instruction_id_list", "expected a non-empty list of instruction ids")
        raw_kwargs = decoded_cell(path, row, "kwargs", "string is not a JSON list")
        if raw_kwargs is None:
            raw_kwargs = [{} for _ in ids]
        if not isinstance(raw_kwargs, list) or len(raw_kwargs) != len(ids):
            fail("kwargs", f"expected a list of {len(ids)} entries (one per instruction)")
        kwargs = []
        for k, entry in enumerate(raw_kwargs):
            try:
                kwargs.append(parse_kwargs(entry))
            except ValueError as exc:
                fail("kwargs", f"entry {k}: {exc}")
        key = v.get("key")
        item_id = f"ifeval/{key}" if key is not None else f"ifeval/{row.position}"
        meta = {"key": key, "instruction_id_list": list(ids), "kwargs": kwargs}
        items.append(EvalItem(item_id, user_message(prompt), meta))
    if not items:
        raise DatasetFormatError(path, "no rows found", hint=f"expected columns: {EXPECTED_COLUMNS}")
    return items
