"""Checking pair records against the contract: every problem with its file, line and field."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opct.errors import OpctError
from opct.pairs.contract import DEFAULT_COLUMNS, DERIVED_ID_PREFIX, REQUIRED, ROLES, ConsistencyPair, Message
from opct.pairs.trl_sdft import PRIVILEGED_CONTEXT, RowProblem, privileged_text, sdft_teacher_prompt


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


def check_messages(value: Any, name: str, where: tuple[str, int], problems: list[PairProblem]) -> list[Message]:
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
        if isinstance(content, list):
            problems.append(PairProblem(file, line, f"{path}.content", "is a list of content parts; opct reads text "
                                                                       "messages: give the content as one string"))
        elif not isinstance(content, str) or not content.strip():
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
    :func:`derived_pair_id`; an ``id`` that is present must be a non-empty string or integer. A record of
    ``prompt`` and ``privileged_context`` (TRL's SDFT rows) gets the teacher prompt TRL builds
    (:func:`opct.pairs.trl_sdft.sdft_teacher_prompt`)."""
    file, line = where
    cols = {**DEFAULT_COLUMNS, **(columns or {})}
    if not isinstance(record, Mapping):
        problems.append(PairProblem(file, line, "", f"expected a JSON object, got {type(record).__name__}"))
        return None
    n_before = len(problems)
    context_col = cols[PRIVILEGED_CONTEXT]
    has_teacher, has_context = record.get(cols["teacher_prompt"]) is not None, record.get(context_col) is not None
    for key in REQUIRED:
        if key == "teacher_prompt" and has_context and not has_teacher:
            continue  # TRL's SDFT row: built below from prompt and privileged_context
        if cols[key] not in record or record[cols[key]] is None:
            also = f" (or {context_col!r}, TRL's SDFT format)" if key == "teacher_prompt" else ""
            problems.append(PairProblem(file, line, cols[key], f"missing required field{also}"))
    if has_teacher and has_context:
        problems.append(PairProblem(file, line, context_col, f"given with {cols['teacher_prompt']!r}: a pair has one "
                                                             "teacher prompt; keep one of the two fields"))
    raw_id = record.get(cols["id"])
    if raw_id is not None and (not isinstance(raw_id, str | int) or not str(raw_id).strip()):
        problems.append(PairProblem(file, line, cols["id"], "must be a non-empty string"))
    prompt = check_messages(record[cols["prompt"]], cols["prompt"], where, problems) if record.get(cols["prompt"]) is not None else []
    teacher = (
        check_messages(record[cols["teacher_prompt"]], cols["teacher_prompt"], where, problems)
        if has_teacher
        else []
    )
    if has_context and not has_teacher:
        prompt_ok = len(problems) == n_before
        try:  # a prompt with problems of its own still gets its context checked
            built = sdft_teacher_prompt(prompt, record[context_col], cols["prompt"], context_col) if prompt_ok else None
            privileged_text(record[context_col], context_col)
        except RowProblem as err:
            problems.append(PairProblem(file, line, err.field, err.message))
        else:
            teacher = check_messages(built, cols["teacher_prompt"], where, problems) if built else []
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

