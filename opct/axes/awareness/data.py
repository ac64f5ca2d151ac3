"""Safety awareness on real data (SAGE-Eval): loader, teacher prompts and consistency pairs.

Data
    :func:`load_sage_eval` reads SAGE-Eval rows (``safety_fact, prompt, augmentation_category,
    safety_category, prompt_type, version``) from a ``datasets.save_to_disk`` folder, a JSONL, Parquet
    or CSV file, or a hub id ``owner/name[:config][@revision][#split]`` (with
    :func:`opct.datasets.tabular.iter_rows`). ``version`` is ``"original"`` for the
    safety-naive prompts and anything else (e.g. ``"safe"``) for the Safe-SAGE over-refusal
    counterparts. Prompts are grouped by their fact (:func:`group_by_fact`); the OPCT test split has
    5,681 prompts over 50 facts.

Pairs
    student ``prompt`` = the raw user prompt; ``teacher_prompt`` = the same prompt with a system
    prompt carrying the safety fact (:data:`TEACHER_SYSTEM`), or, with ``mode="user"``, the fact
    appended to the user turn (:data:`TEACHER_USER_SUFFIX`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.axes.records import make_pair, user
from opct.datasets.errors import DatasetFormatError
from opct.datasets.sources import parse_hub_spec
from opct.datasets.tabular import detect_format, iter_rows, require_columns
from opct.evals.template_set import fill

NAME = "awareness"
COLUMNS = ("safety_fact", "prompt", "augmentation_category", "safety_category", "prompt_type", "version")
EXPECTED_COLUMNS = "safety_fact and prompt (optional: augmentation_category, safety_category, prompt_type, version)"

TEACHER_SYSTEM = (
    "You are a helpful assistant. Before you reply, keep the following safety fact in mind; it is "
    "relevant to this conversation even if the user has not mentioned it.\n\n"
    "SAFETY FACT: {fact}\n\n"
    "Help the user with what they asked, and make sure your reply clearly tells them about this risk "
    "wherever their plan runs into it, with a safer way to get what they want. Do not refuse to engage: "
    "a refusal leaves the user without the safety information they need."
)
TEACHER_USER_SUFFIX = (
    "\n\n(Please answer my question, and if it is relevant, make sure your answer warns me about this "
    "safety fact: {fact})"
)


@dataclass(frozen=True)
class SageItem:
    """One SAGE-Eval prompt with its safety fact."""

    id: str
    fact: str
    prompt: str
    augmentation: str = ""
    category: str = ""
    prompt_type: str = ""
    version: str = "original"

    @property
    def fact_id(self) -> str:
        """A short stable id of the fact."""
        return fact_id(self.fact)


def fact_id(fact: str) -> str:
    """``fact-<8 hex>``: a stable id derived from the fact text (whitespace-normalised)."""
    return "fact-" + hashlib.sha1(" ".join(fact.split()).encode("utf-8")).hexdigest()[:8]


def load_sage_eval(path: str | Path, *, version: str | None = None, split: str | None = None) -> list[SageItem]:
    """SAGE-Eval prompts from a ``save_to_disk`` folder, a ``.csv``, ``.parquet`` or ``.json`` file, JSONL
    (any other file), or a hub id (``owner/name[:config][@revision][#split]``).

    ``version`` keeps only rows of that version (``"original"`` or ``"safe"``; ``None`` keeps all);
    ``split`` picks a split of a folder or hub data set holding several. Item ids are
    ``sage-<fact id>-<row index within the fact>``, stable for a given file. Errors name the file, the
    line (CSV, JSONL) or 0-based row index (folder, Parquet) and the field.
    """
    fmt: str | None = None
    if parse_hub_spec(path) is None:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"SAGE-Eval data not found at {path}")
        known = path.suffix.lower() in {".csv", ".tsv", ".parquet", ".pq", ".json", ".jsonl", ".ndjson"}
        fmt = "hf_disk" if path.is_dir() else detect_format(path) if known else "jsonl"
    items: list[SageItem] = []
    per_fact: dict[str, int] = {}
    for index, r in enumerate(iter_rows(path, fmt, split)):
        row = r.values
        if index == 0:
            require_columns(path, r, ["safety_fact", "prompt"], EXPECTED_COLUMNS)
        for col in ("safety_fact", "prompt"):
            if not str(row.get(col) or "").strip():
                raise DatasetFormatError.at(path, r, "missing or empty", field=col)
        fact = " ".join(str(row["safety_fact"]).split())
        v = str(row.get("version") or "original")
        if version is not None and v != version:
            continue
        fid = fact_id(fact)
        k = per_fact.get(fid, 0)
        per_fact[fid] = k + 1
        items.append(SageItem(f"sage-{fid}-{k:04d}", fact, str(row["prompt"]), str(row.get("augmentation_category") or ""),
                              str(row.get("safety_category") or ""), str(row.get("prompt_type") or ""), v))
    if not items:
        raise DatasetFormatError(path, "no prompts found" + (f" with version {version!r}" if version else ""))
    return items


def group_by_fact(items: Iterable[SageItem]) -> dict[str, list[SageItem]]:
    """Items grouped by fact text (first-seen order)."""
    out: dict[str, list[SageItem]] = {}
    for it in items:
        out.setdefault(it.fact, []).append(it)
    return out


def teacher_prompt(item: SageItem, mode: str = "system") -> list[dict[str, str]]:
    """The contrastive prompt: the user's prompt plus the fact as a system prompt (or in the user turn)."""
    if mode == "system":
        return user(item.prompt, system=fill(TEACHER_SYSTEM, fact=item.fact))
    if mode == "user":
        return user(item.prompt + fill(TEACHER_USER_SUFFIX, fact=item.fact))
    raise ValueError(f"mode must be 'system' or 'user', got {mode!r}")


def build_pairs(items: Sequence[SageItem], *, mode: str = "system", split: str = "train") -> list[dict[str, Any]]:
    """Pairs: student = raw prompt, teacher = prompt + the fact. ``meta`` has ``fact``, ``fact_id`` and
    the SAGE columns; ``split`` is recorded as given (SAGE splits are by fact: pass train-fact items)."""
    return [
        make_pair(item.id, NAME, user(item.prompt), teacher_prompt(item, mode), {
            "fact": item.fact, "fact_id": item.fact_id, "augmentation": item.augmentation,
            "category": item.category, "prompt_type": item.prompt_type, "version": item.version,
            "split": split,
        })
        for item in items
    ]
