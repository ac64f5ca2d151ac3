"""The optional views of an axis: what a consumer beyond ``opct eval`` reads of it, one small dataclass each.

An axis (:class:`opct.evals.contract.Axis`) gives its core, ``name``, ``pairs`` and ``tasks`` (each task with
its metrics); everything else is a view in its ``views``, looked up by type with :func:`view`:

- :class:`ReportView`: the report's columns, figures, section and the paper's side of 0. Without it the
  report shows the axis's evals in its per-eval metric tables only (no column, section or verdict line).
- :class:`InspectView`: how Inspect clusters and headlines its samples. Without it, the default
  :class:`InspectView` (one ``scored`` headline clustered on the item).
- :class:`OrganismView`: its organism pairs' clusters and held-back families, the validation judge and the
  organism check's rows. Without it, every training pair trains (no ``val``/``famval`` split), validation
  leaves its answers unscored and ``opct organism check`` has no rows for it.
- :class:`DataView`: its template sets and real-data files (``opct eval`` flags, ``--data-dir`` folders,
  ``opct pairs build``). Without it, it reads no real data and has no template sets to choose from.

This module imports no axis and nothing that iterates the axes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opct.evals.contract import Axis, Column, FigureSpec, ReportExperiment, Unit
from opct.evals.template_set import TemplateSet

V = TypeVar("V")


def view(axis: Axis, kind: type[V]) -> V | None:
    """The view of type ``kind`` that ``axis`` gives, or None (its consumer then skips it or uses a default)."""
    return next((v for v in axis.views if isinstance(v, kind)), None)


def _no_figures(exp: ReportExperiment) -> list[FigureSpec]:
    return []


@dataclass(frozen=True)
class ReportView:
    """How an axis shows in the experiment report: its section's heading and how-to-read paragraph, its columns
    in the results table and figures in its section (each given the loaded experiment), and the paper's claim for
    OPCT − BCT per results column key (a key ending in ``:`` covers every column it prefixes): the side of 0
    (``"lower"`` / ``"higher"``) and the claim in words."""

    title: str
    howto: str
    columns: Callable[[ReportExperiment], list[Column]]
    figures: Callable[[ReportExperiment], list[FigureSpec]] = _no_figures
    paper_directions: Mapping[str, tuple[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class InspectView:
    """How an axis looks under Inspect: the metadata key its stderr clusters on, its headline values
    (the first also per slice), the description of its ``@task``, the evals that get an Inspect task of
    their own with the data source each defaults to (``{"gpqa": "real"}``), and three readers of a sample
    (None: the defaults below)."""

    cluster: str = "item"
    headline: tuple[str, ...] = ("scored",)
    description: str = ""
    evals: Mapping[str, str] = field(default_factory=dict)
    #: ``(record, unit) -> {headline: value}`` of one scored record.
    values_of: Callable[[Mapping[str, Any], Unit], dict[str, float]] | None = None
    #: ``unit -> target``: its gold answer, an expected behaviour.
    target_of: Callable[[Unit], str] | None = None
    #: ``(eval name, unit) -> {cluster: ..., "slice": ...}``.
    groups_of: Callable[[str, Unit], dict[str, str]] | None = None

    def values(self, record: Mapping[str, Any], unit: Unit) -> dict[str, float]:
        """The headline values of one scored record (default: ``scored`` = 1)."""
        return self.values_of(record, unit) if self.values_of else {"scored": 1.0}

    def target(self, unit: Unit) -> str:
        """A unit's Inspect ``target`` (default: its ``meta["answer"]``, empty where it has none)."""
        if self.target_of:
            return self.target_of(unit)
        return "" if unit.meta.get("answer") is None else str(unit.meta["answer"])

    def groups(self, eval_name: str, unit: Unit) -> dict[str, str]:
        """A sample's cluster (metadata key :attr:`cluster`) and ``slice`` (default: its item, and the eval)."""
        if self.groups_of:
            return self.groups_of(eval_name, unit)
        return {self.cluster: f"{eval_name}|{unit.item_id}", "slice": eval_name}


@dataclass(frozen=True)
class Criterion:
    """One row of the organism's behaviour profile (``opct organism check``, an axis's
    :attr:`OrganismView.criteria`): which items, how each response counts, and the required rate."""

    name: str
    items: list[dict]
    judge: str
    hit: Callable[[Any, dict], bool]
    op: str
    threshold: float

    def passes(self, rate: float) -> bool:
        return rate >= self.threshold if self.op == ">=" else rate <= self.threshold


def _no_criteria(world: Any, n: Callable[[int], int]) -> list[Criterion]:
    return []


def _unjudged(meta: Mapping[str, Any], answer: str) -> bool | None:
    return None


@dataclass(frozen=True)
class OrganismView:
    """How an axis lives in the organism's world beyond its pairs and tasks.

    ``cluster_key``: the ``meta`` key of a pair's cluster (a person, a behaviour, a fact), by which its training
    pairs are divided between ``train`` and ``val`` (:mod:`opct.organism.pairs`; empty: no ``val`` split).
    ``family_key``: the ``meta`` key of a pair's perturbation family. ``validation_families``: training-side
    families held back from training as the ``famval`` split. ``validation_judge(meta, answer)``: whether an
    answer to a validation prompt does what the teacher would do on the clean prompt (None: unscored).
    ``criteria(world, n)``: the rows of ``opct organism check`` (``n`` scales a sample size). ``corpus_part``: the
    part of the organism's training corpus its organism template set makes (``"cues"`` of biased questions,
    ``"wrappers"`` of requests: :func:`opct.organism.world.organism_templates`); empty: none."""

    cluster_key: str = ""
    family_key: str = "family"
    validation_families: tuple[str, ...] = ()
    validation_judge: Callable[[Mapping[str, Any], str], bool | None] = _unjudged
    criteria: Callable[[Any, Callable[[int], int]], list[Criterion]] = _no_criteria
    corpus_part: str = ""


@dataclass(frozen=True)
class DataView:
    """Where an axis's data comes from beyond the organism: its template sets by data source (``"organism"``,
    ``"real"``), the real-data path keys it reads (``real.<key>``) with a line of help each, the keys ``opct
    eval`` offers as flags (``sycophancy_mc`` is ``--sycophancy-mc``) with their help, the keys a ``--data-dir``
    folder holds with their subfolder, and the ``meta`` key of a real pair's unit of variation (the question,
    behaviour or fact) by which ``opct pairs build`` splits items between train and held-out."""

    templates: Mapping[str, TemplateSet] = field(default_factory=dict)
    real_data: Mapping[str, str] = field(default_factory=dict)
    cli_options: Mapping[str, str] = field(default_factory=dict)
    data_dir_layout: Mapping[str, str] = field(default_factory=dict)
    unit_key: str = ""


def inspect_view(axis: Axis) -> InspectView:
    """``axis``'s :class:`InspectView`, or the default one."""
    return view(axis, InspectView) or InspectView()


def organism_view(axis: Axis) -> OrganismView:
    """``axis``'s :class:`OrganismView`, or the default one (no clusters, families, judge or check rows)."""
    return view(axis, OrganismView) or OrganismView()


def data_view(axis: Axis) -> DataView:
    """``axis``'s :class:`DataView`, or the default one (no template sets, no real data)."""
    return view(axis, DataView) or DataView()
