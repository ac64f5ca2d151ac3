"""Consistency pairs: the one data contract between data and training.

A pair is two prompts for one request: ``prompt`` (what the model sees when it misbehaves) and
``teacher_prompt`` (the contrastive prompt under which it behaves well). Prompts are chat message
lists; a plain string means one user message.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opct.errors import OpctError, require_extra
from opct.registry import Registry, UnknownNameError

ROLES = ("system", "user", "assistant")
REQUIRED = ("prompt", "teacher_prompt")
#: A pair without an ``id`` gets ``DERIVED_ID_PREFIX`` + the first 16 hex digits of the sha256 of its
#: prompts (:func:`derived_pair_id`): the same pair gets the same id in every file and every run.
DERIVED_ID_PREFIX = "pair-"
DEFAULT_COLUMNS = {
    "id": "id",
    "axis": "axis",
    "prompt": "prompt",
    "teacher_prompt": "teacher_prompt",
    "meta": "meta",
}

Message = dict[str, str]

#: A pair source turns its argument (the text after ``<name>:`` in ``data.train``) into pair records
#: (dicts in the pair contract, or :class:`ConsistencyPair`). Outer layers register theirs
#: (``organism:<axis>:<split>``, ``attacker:<file>``); files and dataset folders need none.
PairSource = Callable[[str], "Sequence[Mapping[str, Any] | ConsistencyPair]"]
PAIR_SOURCES: Registry[PairSource] = Registry("pair source")


@dataclass(frozen=True)
class ConsistencyPair:
    """One consistency pair: ``prompt`` (misbehaviour) and ``teacher_prompt`` (contrastive), with ``axis`` and ``meta``."""

    id: str
    prompt: list[Message]
    teacher_prompt: list[Message]
    axis: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    #: ``(file or source, line)`` the pair was read from, for messages; not part of the contract
    #: (never written, hashed or compared).
    where: tuple[str, int] = field(default=("", 0), compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "axis": self.axis,
            "prompt": self.prompt,
            "teacher_prompt": self.teacher_prompt,
            "meta": self.meta,
        }


@dataclass(frozen=True)
class PairProblem:
    """One problem found in a pair file: where it is and what is wrong."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class PairFileError(OpctError, ValueError):
    """Raised when a pair file has problems; carries every problem found, not just the first."""

    def __init__(self, problems: list[PairProblem]):
        self.problems = problems
        first, rest = problems[0], problems[1:50]
        shown = "".join(f"\n  {p}" for p in rest)
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        total = f" ({len(problems)} problems in all)" if len(problems) > 1 else ""
        super().__init__(f"{first}{total}{shown}{more}")


def _check_messages(value: Any, name: str, where: tuple[str, int], problems: list[PairProblem]) -> list[Message]:
    file, line = where
    if isinstance(value, str):
        if not value.strip():
            problems.append(PairProblem(file, line, name, "is an empty string; give the prompt text"))
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        problems.append(
            PairProblem(file, line, name, f"must be a string or a list of chat messages, got {type(value).__name__}")
        )
        return []
    if not value:
        problems.append(PairProblem(file, line, name, "is an empty message list"))
        return []
    messages: list[Message] = []
    for i, msg in enumerate(value):
        path = f"{name}[{i}]"
        if not isinstance(msg, Mapping):
            problems.append(PairProblem(file, line, path, f"must be an object with role and content, got {type(msg).__name__}"))
            continue
        role, content = msg.get("role"), msg.get("content")
        if role not in ROLES:
            problems.append(PairProblem(file, line, f"{path}.role", f"must be one of {', '.join(ROLES)}, got {role!r}"))
        if not isinstance(content, str) or not content.strip():
            problems.append(PairProblem(file, line, f"{path}.content", "missing or empty; give the message text"))
        messages.append({"role": str(role), "content": content if isinstance(content, str) else ""})
    if messages and messages[-1]["role"] == "assistant":
        problems.append(
            PairProblem(file, line, name, "ends with an assistant message; a prompt must end with a user or system turn")
        )
    return messages


class DerivedPairIdWarning(UserWarning):
    """Pairs of a file had no ``id``; each got one derived from its prompts (said once per file)."""


def derived_pair_id(prompt: list[Message], teacher_prompt: list[Message]) -> str:
    """The id of a pair that has none: ``pair-`` and 16 hex digits of the sha256 of its two prompts
    (as chat messages, in canonical JSON), stable across files, runs and machines."""
    canonical = json.dumps({"prompt": prompt, "teacher_prompt": teacher_prompt}, sort_keys=True, ensure_ascii=False,
                           separators=(",", ":"))
    return DERIVED_ID_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def pair_from_record(
    record: Any,
    where: tuple[str, int],
    problems: list[PairProblem],
    columns: Mapping[str, str] | None = None,
) -> ConsistencyPair | None:
    """Build a pair from one decoded record, appending every problem found to ``problems``.

    A record without an ``id`` field (TRL-style: ``prompt`` and ``teacher_prompt`` only) gets
    :func:`derived_pair_id`; an ``id`` that is present must be a non-empty string or integer."""
    file, line = where
    cols = {**DEFAULT_COLUMNS, **(columns or {})}
    if not isinstance(record, Mapping):
        problems.append(PairProblem(file, line, "", f"expected a JSON object, got {type(record).__name__}"))
        return None
    n_before = len(problems)
    for key in REQUIRED:
        if cols[key] not in record or record[cols[key]] is None:
            problems.append(PairProblem(file, line, cols[key], "missing required field"))
    raw_id = record.get(cols["id"])
    if raw_id is not None and (not isinstance(raw_id, str | int) or not str(raw_id).strip()):
        problems.append(PairProblem(file, line, cols["id"], "must be a non-empty string"))
    prompt = _check_messages(record[cols["prompt"]], cols["prompt"], where, problems) if record.get(cols["prompt"]) is not None else []
    teacher = (
        _check_messages(record[cols["teacher_prompt"]], cols["teacher_prompt"], where, problems)
        if record.get(cols["teacher_prompt"]) is not None
        else []
    )
    axis = record.get(cols["axis"], "") or ""
    if not isinstance(axis, str):
        problems.append(PairProblem(file, line, cols["axis"], "must be a string"))
    meta = record.get(cols["meta"], {}) or {}
    if not isinstance(meta, Mapping):
        problems.append(PairProblem(file, line, cols["meta"], f"must be an object, got {type(meta).__name__}"))
        meta = {}
    if len(problems) > n_before:
        return None
    pair_id = str(raw_id) if raw_id is not None else derived_pair_id(prompt, teacher)
    return ConsistencyPair(id=pair_id, prompt=prompt, teacher_prompt=teacher, axis=str(axis), meta=dict(meta),
                           where=(file, line))


def _records_from_jsonl(path: Path, problems: list[PairProblem]) -> Iterator[tuple[int, Any]]:
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                problems.append(PairProblem(str(path), lineno, "", f"not UTF-8 text (byte {raw[err.start]:#04x} at column "
                                                                   f"{err.start + 1}); save the file as UTF-8"))
                continue
            if not text.strip():
                continue
            try:
                yield lineno, json.loads(text)
            except json.JSONDecodeError as err:
                problems.append(PairProblem(str(path), lineno, "", f"malformed JSON ({err.msg} at column {err.colno})"))


def _records_from_hf(path: Path | str, split: str | None) -> Iterator[tuple[int, Any]]:
    datasets = require_extra("datasets", "data", f"reading pairs from the Hugging Face dataset {path}")

    if Path(path).exists():
        ds = datasets.load_from_disk(str(path))
    else:
        ds = datasets.load_dataset(str(path), split=split or "train")
    if isinstance(ds, datasets.DatasetDict):
        if split is None:
            if len(ds) != 1:
                raise ValueError(f"{path} holds splits {list(ds)}; choose one with split=...")
            split = next(iter(ds))
        ds = ds[split]
    yield from enumerate(ds, start=1)


def _is_hf_folder(path: Path) -> bool:
    return path.is_dir() and any((path / name).exists() for name in ("dataset_info.json", "state.json", "dataset_dict.json"))


def read_pairs(
    source: str | Path,
    columns: Mapping[str, str] | None = None,
    split: str | None = None,
) -> list[ConsistencyPair]:
    """Read and validate consistency pairs from a JSONL file or a Hugging Face dataset.

    ``source`` is a ``.jsonl`` / ``.json`` file, a ``save_to_disk`` folder, or a hub id (resolved only
    when given). ``columns`` maps contract names (``id``, ``prompt``, ``teacher_prompt``, ``axis``,
    ``meta``) to the source's field names. Raises :class:`PairFileError` listing every problem
    (file, line, field) if any record is invalid, including duplicate ids.
    """
    path = Path(source)
    problems: list[PairProblem] = []
    if path.suffix in {".jsonl", ".json"} or path.is_file():
        if not path.exists():
            raise FileNotFoundError(f"pair file not found: {path}")
        if path.suffix == ".json":
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except UnicodeDecodeError as err:
                raise PairFileError([PairProblem(str(path), 0, "", f"not UTF-8 text ({err.reason}); save it as UTF-8")]) from None
            except json.JSONDecodeError as err:
                raise PairFileError([PairProblem(str(path), err.lineno, "", f"malformed JSON ({err.msg} at column {err.colno})")]
                                    ) from None
            if not isinstance(data, list):
                raise PairFileError([PairProblem(str(path), 0, "", "a .json pair file must hold a list of pairs")])
            records: Iterable[tuple[int, Any]] = enumerate(data, start=1)
        else:
            records = _records_from_jsonl(path, problems)
    elif _is_hf_folder(path) or not path.exists():
        # deferred: loads torch and transformers only when called
        from opct.models import looks_like_local_path

        if not path.exists() and looks_like_local_path(str(source)):
            raise FileNotFoundError(f"pair data not found: {path} (a local path; it is not looked up on the hub)")
        records = _records_from_hf(source, split)
    else:
        raise FileNotFoundError(f"{path} is neither a JSONL file nor a Hugging Face dataset folder")

    pairs: list[ConsistencyPair] = []
    first_line: dict[str, int] = {}
    id_field = (columns or {}).get("id", "id")
    derived = 0
    for lineno, record in records:
        pair = pair_from_record(record, (str(path), lineno), problems, columns)
        if pair is None:
            continue
        own_id = isinstance(record, Mapping) and record.get(id_field) is not None
        derived += not own_id
        if pair.id in first_line:
            what = "duplicate id" if own_id else "the same prompts as the pair"
            problems.append(
                PairProblem(str(path), lineno, id_field, f"{what} {pair.id!r} (first seen on line {first_line[pair.id]})")
            )
            continue
        first_line[pair.id] = lineno
        pairs.append(pair)
    if problems:
        raise PairFileError(problems)
    if not pairs:
        raise PairFileError([PairProblem(str(path), 0, "", "contains no pairs")])
    if derived:
        warnings.warn(f"{path}: {derived} of {len(pairs)} pairs have no {id_field!r}; each got "
                      f"{DERIVED_ID_PREFIX}<sha256 of its prompt and teacher_prompt, 16 hex digits>",
                      DerivedPairIdWarning, stacklevel=2)
    return pairs


def pairs_from_records(records: Iterable[Mapping[str, Any] | ConsistencyPair], source: str) -> list[ConsistencyPair]:
    """Validate built records (from a pair source) exactly like a file's; raises :class:`PairFileError`."""
    problems: list[PairProblem] = []
    pairs = []
    for i, record in enumerate(records, start=1):
        if isinstance(record, ConsistencyPair):
            pair: ConsistencyPair | None = dataclasses.replace(record, where=(source, i))
        else:
            pair = pair_from_record(record, (source, i), problems)
        if pair is not None:
            pairs.append(pair)
    if problems:
        raise PairFileError(problems)
    return pairs


def _split_key(name: str) -> str:
    """A split name without case, spaces or punctuation: ``Held-Out`` -> ``heldout``."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def is_heldout_split(name: str) -> bool:
    """Whether ``name`` is the held-out split in any spelling (``heldout``, ``held-out``, ``HeldOut``,
    ``held_out``, ``holdout``): held-out data is for the final evaluation, never for training."""
    return _split_key(name) in {"heldout", "holdout"}


def is_train_split(name: str) -> bool:
    """Whether ``name`` is the training split in any spelling (``train``, ``Train``, ``training``)."""
    return _split_key(name) in {"train", "training"}


def is_family_validation_split(name: str) -> bool:
    """Whether ``name`` is the family validation split (``famval``, ``family-validation``): whole
    perturbation families held back from training to measure transfer to unseen perturbations."""
    return _split_key(name) in {"famval", "familyvalidation"}


def is_validation_split(name: str) -> bool:
    """Whether ``name`` is a validation split in any spelling (``val``, ``Val``, ``validation``, and the
    family validation split :func:`is_family_validation_split`): never trained on."""
    return _split_key(name) in {"val", "validation"} or is_family_validation_split(name)


def load_pair_source(spec: str, columns: Mapping[str, str] | None = None, split: str | None = None) -> list[ConsistencyPair]:
    """Pairs from one ``data.train`` entry: ``<source>:<argument>`` for a registered pair source
    (e.g. ``organism:sycophancy:train``), else a JSONL/JSON file, a dataset folder or a hub id."""
    prefix, sep, argument = spec.partition(":")
    if sep and prefix in PAIR_SOURCES:
        pairs = pairs_from_records(PAIR_SOURCES.get(prefix)(argument), spec)
        if not pairs:  # e.g. a split name the source does not know
            raise PairFileError([PairProblem(spec, 0, "", f"pair source {prefix!r} gave no pairs for {argument!r}; "
                                                          "check the name after the colon")])
        return pairs
    if sep and len(prefix) > 1 and prefix.isidentifier() and not Path(spec).exists():
        raise UnknownNameError("pair source", prefix, PAIR_SOURCES.names())
    return read_pairs(spec, columns=columns, split=split)


def write_pairs(pairs: Iterable[ConsistencyPair | Mapping[str, Any]], path: str | Path) -> Path:
    """Write pairs as JSONL (one object per line), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for pair in pairs:
            record = pair.to_dict() if isinstance(pair, ConsistencyPair) else dict(pair)
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


@dataclass
class PairSummary:
    """Counts per axis and split, and optional prompt-length percentiles in tokens."""

    n: int
    by_axis_split: dict[tuple[str, str], int]
    token_percentiles: dict[str, dict[int, int]] | None = None
    #: ``(pair id, side, tokens)`` of every rendered prompt longer than the context given.
    too_long: list[tuple[str, str, int]] = field(default_factory=list)


def summarize_pairs(pairs: list[ConsistencyPair], tokenizer: Any | None = None, context: int | None = None) -> PairSummary:
    """Summarise pairs; with a tokenizer, also the 50/90/99/100th percentile rendered prompt lengths,
    and every prompt that leaves no room in a ``context`` of that many tokens."""
    counts: dict[tuple[str, str], int] = {}
    for p in pairs:
        key = (p.axis or "-", str(p.meta.get("split", "-")))
        counts[key] = counts.get(key, 0) + 1
    percentiles = None
    if tokenizer is not None:
        # deferred: loads torch and transformers only when called
        from opct.models import render_prompt

        percentiles = {}
        too_long = []
        for side in ("prompt", "teacher_prompt"):
            by_pair = [(p.id, len(render_prompt(tokenizer, getattr(p, side)))) for p in pairs]
            too_long += [(pid, side, n) for pid, n in by_pair if context is not None and n >= context]
            lengths = sorted(n for _, n in by_pair)
            percentiles[side] = {q: lengths[min(len(lengths) - 1, (q * len(lengths)) // 100)] for q in (50, 90, 99, 100)}
        return PairSummary(len(pairs), dict(sorted(counts.items())), percentiles, too_long)
    return PairSummary(n=len(pairs), by_axis_split=dict(sorted(counts.items())), token_percentiles=percentiles)
