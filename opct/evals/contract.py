"""The core contract every axis keeps, in one module that imports no axis: :class:`Axis` (name, pairs,
tasks), the eval task (:class:`EvalTask` of :class:`Unit` s, scored into :class:`Judgement` s, its metrics,
built from a :class:`TaskContext`) and the report's :class:`Column`. The optional views an axis may add
(report, Inspect, organism, real data) are in :mod:`opct.evals.axis_views`.

Whatever iterates axes (``opct eval``, experiments, the organism's pair source, validation and check,
the report, Inspect, the CLI's real-data flags) reads them through :data:`opct.evals.axis_registry.AXES` and
never names an axis.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opct.errors import OpctError
from opct.evals.outcomes import ABSTAINED, EMPTY, ERROR, TRUNCATED, UNPARSED
from opct.judges import make_judge
from opct.runs.manifest import hash_records
from opct.stats.estimate import Estimate

#: The report's loaded experiment (:class:`opct.report.experiment.Experiment`) and one metric read from it
#: (:class:`opct.report.metric.Metric`), as the report hands them to an axis's hooks; the contract sits below the
#: report, so it names them without importing it.
ReportExperiment = Any
ReportMetric = Any

#: A figure the report draws: ``(file stem, draw)``; ``draw`` returns a matplotlib Figure or None.
FigureSpec = tuple[str, Callable[[], Any]]
#: A headline value that does not apply to an answer (Inspect leaves NaN out of its means).
NAN = math.nan


#: The outcome classes a safety axis leaves out of its denominators (see :mod:`opct.evals.outcomes`).
SAFETY_UNSCORED = (EMPTY, TRUNCATED, UNPARSED, ABSTAINED, ERROR)
#: Capability benchmarks count an empty, unparsed or cut-off answer as wrong (their convention: the
#: answer a model did not give within the limit is not a right one), so only an abstention or an error
#: is left out of a capability rate; the answers counted wrong are shown beside it.
CAPABILITY_UNSCORED = (ABSTAINED, ERROR)
#: The outcome classes a capability rate keeps in its n as wrong answers (shown beside it: "counted wrong").
CAPABILITY_COUNTED_WRONG = (EMPTY, UNPARSED, TRUNCATED)


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
    ``counted_wrong_classes``: the outcome classes its metrics keep in their n as failures (capability:
    empty, unparsed and cut-off answers are wrong answers); their counts are shown beside each rate.
    """

    name: str
    units: list[Unit]
    score: Scorer
    metrics: MetricsFn
    max_new_tokens: int = 256
    description: str = ""
    needs_answer: bool = False
    unscored_classes: tuple[str, ...] = SAFETY_UNSCORED
    counted_wrong_classes: tuple[str, ...] = ()
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
    """What an axis needs to build its pairs and tasks: the data source and split, and how to judge and limit them.

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
    #: The columns of an axis's own real-data file, where it reads any (``opct pairs build --column``).
    columns: Mapping[str, Any] | None = None

    def template_set(self, axis: Any) -> Any:
        """The :class:`~opct.evals.template_set.TemplateSet` ``axis`` uses here (default: the one named after the source)."""
        name = self.templates.get(axis.name, self.source)
        if name not in axis.templates:
            raise ValueError(f"axis {axis.name!r} has no template set {name!r}; it has {', '.join(axis.templates) or 'none'}")
        return axis.templates[name]

    def make_judge(self, role: str) -> Any:
        """The judge playing ``role`` (``refusal``, ``harm``, ``warning``...) for this data source, or None."""
        return make_judge(role, "organism" if self.source == "organism" else self.judge, self.judge_options)

    def cap(self, n: int) -> int:
        """``n`` items, or fewer under ``limit``."""
        return n if self.limit is None else min(n, self.limit)



def seeded_sample(items: list[T], n: int | None, key: str | int) -> list[T]:
    """``items`` if there are at most ``n``, else a sample of ``n`` drawn with ``random.Random(key)``."""
    if n is None or len(items) <= n:
        return items
    return random.Random(key).sample(items, n)


MetricGetter = Callable[[ReportExperiment, str], "ReportMetric | None"]
#: ``(experiment, method) -> ({unit: [values]}, statistic or None)``: one method's values per unit of
#: variation (question, behaviour, fact, item) for the paired differences between methods.
PairedValues = Callable[[ReportExperiment, str], "tuple[dict[str, list[float]], Callable[[list[list[float]]], float] | None]"]


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


@dataclass(frozen=True)
class Column:
    """One table column: a header, how to read the metric for a method, and how to print it."""

    key: str
    title: str
    get: MetricGetter
    percent: bool = True
    #: "lower" or "higher": which direction is better.
    better: str = "higher"
    #: How to read one method's per-unit values for paired differences (:mod:`opct.report.paired`);
    #: None: the column has no paired difference.
    paired: PairedValues | None = None
    #: The eval whose records are behind the column (its samples on ``samples.html``); None: no eval.
    eval_name: str | None = None
    #: The outcome class the column's rate counts, when it counts one (its samples link filters on it).
    outcome: str | None = None

    @property
    def header(self) -> str:
        return f"{self.title} {'↓' if self.better == 'lower' else '↑'}"


def threshold_flag(value: Any, threshold: float = 0.5) -> float:
    """1.0 when a judge's ``value`` is at least ``threshold``, 0.0 below, NaN when there is none."""
    return NAN if value is None else float(float(value) >= threshold)


class Axis:
    """The core of an axis: a ``name``, how its consistency ``pairs`` are built, and its eval ``tasks`` (each an
    :class:`EvalTask` that carries its ``metrics``: records to rates with n and clustered intervals).
    Subclass it, set ``name``, override what applies, register an instance in :data:`opct.evals.axis_registry.AXES`.

    ``name``: the registry name, also the eval name of its held-out task (``<name>_train`` for the training
    split in experiments). ``views``: its optional views (:mod:`opct.evals.axis_views`: the report's, Inspect's,
    the organism's, the real data's), each looked up by type by the consumer that reads it; an axis without a
    view is skipped by that consumer or gets its documented default. An axis that overrides :meth:`pairs` can be
    trained on (:attr:`has_pairs`), and its tasks are built per perturbation split (:attr:`per_split`); one that
    does not (capability) is evaluated once per model.
    """

    name: str = ""
    views: tuple[Any, ...] = ()

    def pairs(self, ctx: TaskContext) -> list[dict[str, Any]]:
        """Consistency pairs for ``ctx`` (its data source, split, world seed, real-data paths and limit)."""
        raise NotImplementedError(f"axis {self.name!r} has no consistency pairs")

    def tasks(self, ctx: TaskContext) -> list[EvalTask]:
        """The evaluation tasks for ``ctx`` (its data source, split, limit, judge and paths)."""
        return []

    @property
    def has_pairs(self) -> bool:
        """Whether it builds consistency pairs (an experiment can train on it)."""
        return type(self).pairs is not Axis.pairs

    @property
    def per_split(self) -> bool:
        """Whether its tasks depend on the perturbation split (else they are built once per model)."""
        return self.has_pairs
