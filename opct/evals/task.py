"""An evaluation task: prompts to answer, a way to judge each answer, and metrics over the records."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opct.manifest import hash_records
from opct.metrics import Estimate


@dataclass(frozen=True)
class Unit:
    """One prompt to answer. ``(item_id, variant)`` is unique within a task."""

    item_id: str
    variant: str
    prompt: list[dict[str, str]]
    split: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.item_id}|{self.variant}"

    def to_dict(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "variant": self.variant, "split": self.split, "prompt": self.prompt, "meta": self.meta}


@dataclass(frozen=True)
class Judgement:
    """What scoring one response produced: the parsed answer, named scores, and who judged."""

    parsed: Any
    scores: dict[str, Any]
    judge: str
    judge_version: str
    ok: bool = True


Scorer = Callable[[Unit, str], Judgement]
MetricsFn = Callable[[Sequence[Mapping[str, Any]]], dict[str, Estimate]]


@dataclass
class EvalTask:
    """A named evaluation: units, a scorer per response, and metrics over all records."""

    name: str
    units: list[Unit]
    score: Scorer
    metrics: MetricsFn
    max_new_tokens: int = 256
    description: str = ""

    def data_hash(self) -> str:
        return hash_records([u.to_dict() for u in self.units])

    def __post_init__(self) -> None:
        keys = [u.key for u in self.units]
        if len(set(keys)) != len(keys):
            dup = next(k for k in keys if keys.count(k) > 1)
            raise ValueError(f"task {self.name!r} has two units with item_id|variant {dup!r}")
        if not self.units:
            raise ValueError(f"task {self.name!r} has no units")
