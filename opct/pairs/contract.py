"""Consistency pairs: the one data contract between data and training.

A pair is two prompts for one request: ``prompt`` (what the model sees when it misbehaves) and
``teacher_prompt`` (the contrastive prompt under which it behaves well). Prompts are chat message
lists; a plain string means one user message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
    # not a pair's field: TRL's SDFT rows carry it instead of teacher_prompt (opct.pairs.trl_sdft)
    "privileged_context": "privileged_context",
}

Message = dict[str, str]


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

