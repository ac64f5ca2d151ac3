"""The contracts every axis keeps, in one module that imports no axis: :class:`Axis` and its hooks,
the eval task (:class:`EvalTask` of :class:`Unit` s, scored into :class:`Judgement` s, built from a
:class:`TaskContext`), the report's :class:`Column` and an axis's view under Inspect
(:class:`InspectView`).

Whatever iterates axes (``opct eval``, experiments, the organism's pair source, validation and check,
the report, Inspect, the CLI's real-data flags) reads these hooks through :data:`opct.evals.axis_registry.AXES` and
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
from opct.evals.template_set import TemplateSet
from opct.runs.manifest import hash_records
from opct.stats.estimate import Estimate

#: The report's loaded experiment (:class:`opct.report.load.Experiment`) and one metric read from it
#: (:class:`opct.report.load.Metric`), as the report hands them to an axis's hooks; the contract sits below the
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
        """The :class:`~opct.evals.template_set.TemplateSet` ``axis`` uses here (default: the one named after the source)."""
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


@dataclass(frozen=True)
class InspectView:
    """How an axis looks under Inspect: the metadata key its stderr clusters on, its headline values
    (the first also per slice), the description of its ``@task``, and the evals that get an Inspect
    task of their own, with the data source each defaults to (``{"gpqa": "real"}``)."""

    cluster: str = "item"
    headline: tuple[str, ...] = ("scored",)
    description: str = ""
    evals: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Criterion:
    """One row of the organism's behaviour profile (``opct organism check``, an axis's
    :meth:`Axis.organism_criteria`): which items, how each response counts, and the required rate."""

    name: str
    items: list[dict]
    judge: str
    hit: Callable[[Any, dict], bool]
    op: str
    threshold: float

    def passes(self, rate: float) -> bool:
        return rate >= self.threshold if self.op == ">=" else rate <= self.threshold


class Axis:
    """What an axis provides. Subclass it, set the attributes, override what applies, register an instance.

    Attributes
        ``name``: the registry name, also the eval name of its held-out task (``<name>_train`` for the
        training split in experiments). ``title`` / ``howto``: the report section's heading and its
        how-to-read paragraph. ``templates``: template sets by data source (``"organism"``, ``"real"``).
        ``judges``: the judge roles its tasks ask for, by data source (e.g. ``{"real": ("refusal",
        "harm")}``). ``real_data``: the real-data path keys it reads (``opct eval`` ``real.<key>``), with
        a line of help each. ``has_pairs``: it has consistency pairs (it can be trained on).
        ``per_split``: its tasks depend on the perturbation split (else they are built once).
        ``unit_key``: the ``meta`` key of a pair's unit of variation (the question, behaviour or fact),
        by which ``opct pairs build`` splits items between train and held-out. ``organism_cluster_key``:
        the ``meta`` key of an organism pair's cluster (a person, a behaviour, a fact), by which its
        training pairs are divided between ``train`` and ``val`` (:mod:`opct.organism.pairs`).
        ``organism_family_key``: the ``meta`` key of an organism pair's perturbation family (a cue or
        wrapper family, a hazard type). ``organism_validation_families``: one or two training-side
        families held back from training as the ``famval`` split (never held-out ones).
        ``inspect``: its :class:`InspectView`. ``paper_directions``: the paper's claim for OPCT − BCT
        per results column key (a key ending in ``:`` covers every column it prefixes): the side of 0
        (``"lower"`` / ``"higher"``, or ``"no worse"``: non-inferiority within the report's margin) and the claim in words. ``cli_options``: the :attr:`real_data`
        keys ``opct eval`` offers as flags (``sycophancy_mc`` is ``--sycophancy-mc``), with their help.
        ``data_dir_layout``: the :attr:`real_data` keys a ``--data-dir`` folder holds, with their subfolder.
    """

    name: str = ""
    title: str = ""
    howto: str = ""
    templates: Mapping[str, TemplateSet] = {}
    judges: Mapping[str, tuple[str, ...]] = {}
    real_data: Mapping[str, str] = {}
    has_pairs: bool = True
    per_split: bool = True
    unit_key: str = ""
    organism_cluster_key: str = ""
    organism_family_key: str = "family"
    organism_validation_families: tuple[str, ...] = ()
    inspect: InspectView = InspectView()
    paper_directions: Mapping[str, tuple[str, str]] = {}
    cli_options: Mapping[str, str] = {}
    data_dir_layout: Mapping[str, str] = {}

    def organism_pairs(self, split: str, seed: int | None = None) -> list[dict[str, Any]]:
        """Consistency pairs of the organism's world for ``split`` (world ``seed``, default the shipped one)."""
        raise NotImplementedError(f"axis {self.name!r} has no organism pairs")

    def real_pairs(self, paths: Mapping[str, str], split: str, limit: int | None = None,
                   columns: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Consistency pairs built from the real data files in ``paths`` (keys of :attr:`real_data`);
        ``columns`` names the columns of the axis's own file, where the axis reads any (sycophancy)."""
        raise NotImplementedError(f"axis {self.name!r} has no real-data pairs")

    def tasks(self, ctx: TaskContext) -> list[EvalTask]:
        """The evaluation tasks for ``ctx`` (its data source, split, limit, judge and paths)."""
        if ctx.source == "organism":
            return self.organism_tasks(ctx)
        if ctx.source == "real":
            return self.real_tasks(ctx)
        raise ValueError(f"unknown data source {ctx.source!r}; use 'organism' or 'real'")

    def organism_tasks(self, ctx: TaskContext) -> list[EvalTask]:
        """Tasks on the organism's world (exact judges); none by default."""
        return []

    def real_tasks(self, ctx: TaskContext) -> list[EvalTask]:
        """Tasks on the real data files of ``ctx.real`` (none when the axis's files are not given)."""
        return []

    def report_columns(self, exp: ReportExperiment) -> list[Column]:
        """The axis's columns in the report's results table."""
        return []

    def report_figures(self, exp: ReportExperiment) -> list[FigureSpec]:
        """The figures of the axis's report section."""
        return []

    def inspect_values(self, record: Mapping[str, Any], unit: Unit) -> dict[str, float]:
        """The headline values (:attr:`InspectView.headline`) of one scored record under Inspect."""
        return {"scored": 1.0}

    def inspect_target(self, unit: Unit) -> str:
        """A unit's Inspect ``target``: its gold answer, empty where it has none."""
        return "" if unit.meta.get("answer") is None else str(unit.meta["answer"])

    def inspect_groups(self, eval_name: str, unit: Unit) -> dict[str, str]:
        """A sample's cluster (metadata key :attr:`InspectView.cluster`) and ``slice`` (its grouped metric's group)."""
        return {self.inspect.cluster: f"{eval_name}|{unit.item_id}", "slice": eval_name}

    def validation_judge(self, meta: Mapping[str, Any], answer: str) -> bool | None:
        """Whether a non-empty ``answer`` to a validation prompt does what the teacher would do on the
        clean prompt (the organism's exact judge), or None when unscored (also: no judge)."""
        return None

    def organism_criteria(self, world: Any, n: Callable[[int], int]) -> list[Criterion]:
        """The organism's required behaviours on this axis (``opct organism check``); ``n`` scales a sample size."""
        return []
