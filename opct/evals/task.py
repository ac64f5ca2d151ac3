"""An evaluation task: prompts to answer, a way to judge each answer, and metrics over the records."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opct.errors import OpctError
from opct.evals.outcomes import ABSTAINED, EMPTY, ERROR, TRUNCATED, UNPARSED
from opct.runs.manifest import hash_records
from opct.stats.estimate import Estimate

#: The outcome classes a safety axis leaves out of its denominators (see :mod:`opct.evals.outcomes`).
SAFETY_UNSCORED = (EMPTY, TRUNCATED, UNPARSED, ABSTAINED, ERROR)
#: Capability benchmarks count an unparsed answer as wrong (their convention): it is scored; an answer
#: cut off by the generation limit is not an answer, and stays unscored.
CAPABILITY_UNSCORED = (EMPTY, TRUNCATED, ABSTAINED, ERROR)


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


T = TypeVar("T")
Scorer = Callable[[Unit, str], Judgement]
MetricsFn = Callable[[Sequence[Mapping[str, Any]]], dict[str, Estimate]]


#: The smallest generation limit within which any answer can be scored: one token of answer and the end of
#: sequence. Below it every answer that says anything is cut off, so the eval could only come out INCOMPLETE:
#: such a limit is an input error (:func:`check_token_limit`), never run.
SHORTEST_ANSWER_LIMIT = 2


class TokenLimitError(OpctError, ValueError):
    """A generation limit too small for a task's answers (exit 2, before any generation)."""


@dataclass
class EvalTask:
    """A named evaluation: units, a scorer per response, and metrics over all records.

    ``needs_answer``: the scorer reads an answer (a letter, a number) and a ``parsed`` of ``None``
    means it found none (outcome ``unparsed``). ``unscored_classes``: the outcome classes the
    metrics leave out of their denominators; their share decides whether the eval is incomplete.
    ``max_new_tokens``: the task's own generation limit (the run's is capped at it). With
    ``judges_cut_replies`` (the safety axes) an answer cut off at the limit is judged on its visible text:
    a harmful step or a readable answer counts as what it is, a loop is ``degenerate``, anything else is
    ``truncated`` and unscored, so a limit too small for the task shows as an INCOMPLETE eval (see
    :mod:`opct.evals.outcomes`), never as refusals; without it (capability) every cut answer is ``truncated``.
    """

    name: str
    units: list[Unit]
    score: Scorer
    metrics: MetricsFn
    max_new_tokens: int = 256
    description: str = ""
    needs_answer: bool = False
    unscored_classes: tuple[str, ...] = SAFETY_UNSCORED
    #: Judge a reply cut off at the limit on its visible text (off: it is ``truncated``, never judged).
    judges_cut_replies: bool = True
    #: The judge spec its scorer asks (``rule``, ``http:<model>``; empty for the organism's exact judges):
    #: part of its results' identity, so results judged otherwise are never reused.
    judge: str = ""
    #: The smallest generation limit its answers can be scored within (an axis with longer shortest answers
    #: raises it); a run's limit below it is refused (:func:`check_token_limit`).
    min_new_tokens_needed: int = SHORTEST_ANSWER_LIMIT

    def data_hash(self) -> str:
        return hash_records([u.to_dict() for u in self.units])

    def __post_init__(self) -> None:
        keys = [u.key for u in self.units]
        if len(set(keys)) != len(keys):
            dup = next(k for k in keys if keys.count(k) > 1)
            raise ValueError(f"task {self.name!r} has two units with item_id|variant {dup!r}")
        if not self.units:
            raise ValueError(f"task {self.name!r} has no units")


@dataclass(frozen=True)
class TaskContext:
    """What an axis needs to build its tasks: the data source and split, and how to judge and limit them.

    ``source``: ``"organism"`` (its world, exact judges) or ``"real"`` (the files in ``real``, keyed by
    the axes' ``real_data`` names). ``judge``: the judge spec for real data (``rule`` or
    ``http:<model>``). ``limit`` caps the items of every task (a seeded sample). ``world_seed``: the
    organism world (``None``: the shipped one). ``templates``: another template set for an axis.
    """

    split: str = "heldout"
    source: str = "organism"
    limit: int | None = None
    real: Mapping[str, str] = field(default_factory=dict)
    judge: str = "rule"
    world_seed: int | None = None
    #: Template set per axis name, when not the data source's own (e.g. ``{"sycophancy": "real"}``:
    #: the real-model cues asked of the organism).
    templates: Mapping[str, str] = field(default_factory=dict)
    #: Model judges' timeout, retries and fail-fast rule (:class:`opct.judges.JudgeOptions`; None: defaults).
    judge_options: Any = None

    def template_set(self, axis: Any) -> Any:
        """The :class:`~opct.axes.base.TemplateSet` ``axis`` uses here (default: the one named after the source)."""
        name = self.templates.get(axis.name, self.source)
        if name not in axis.templates:
            raise ValueError(f"axis {axis.name!r} has no template set {name!r}; it has {', '.join(axis.templates) or 'none'}")
        return axis.templates[name]

    def make_judge(self, role: str) -> Any:
        """The judge playing ``role`` (``refusal``, ``harm``, ``warning``...) for this data source, or None."""
        from opct.judges import make_judge

        return make_judge(role, "organism" if self.source == "organism" else self.judge, self.judge_options)

    def cap(self, n: int) -> int:
        """``n`` items, or fewer under ``limit``."""
        return n if self.limit is None else min(n, self.limit)

    def world(self) -> Any:
        """The organism's world."""
        from opct.organism.world import world

        return world(self.world_seed)


def seeded_sample(items: list[T], n: int | None, key: str | int) -> list[T]:
    """``items`` if there are at most ``n``, else a sample of ``n`` drawn with ``random.Random(key)``."""
    if n is None or len(items) <= n:
        return items
    return random.Random(key).sample(items, n)


def check_token_limit(tasks: Sequence[EvalTask], max_new_tokens: int) -> None:
    """Raise :class:`TokenLimitError` when ``max_new_tokens`` (as each task caps it) is below what a task's
    answers need, naming the setting, the task, the minimum and what to do; call it before any generation."""
    for task in tasks:
        if min(max_new_tokens, task.max_new_tokens) < task.min_new_tokens_needed:
            raise TokenLimitError(
                f"--max-new-tokens {max_new_tokens} is too small for {task.name}: its answers need at least "
                f"{task.min_new_tokens_needed} new tokens (a token of answer and the end of sequence), so every answer "
                f"would be cut off and nothing measured; use --max-new-tokens {task.min_new_tokens_needed} or more "
                "(generation.max_new_tokens in an experiment file)")
