""":class:`HookAxis`: an axis written as attributes and methods, its optional views built from them.

The core contract (:class:`opct.evals.contract.Axis`) is a name, pairs and tasks; the report, Inspect, the
organism and the real-data readers each look up a view of their own (:mod:`opct.evals.axis_views`). The
built-in axes give every view, so they subclass this class: they set the attributes and override the methods
that apply, and :attr:`views` gathers them into a :class:`ReportView`, an :class:`InspectView`, an
:class:`OrganismView` and a :class:`DataView`. A new axis may equally subclass :class:`Axis` and list
only the views it wants.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from opct.evals.axis_views import Criterion, DataView, InspectView, OrganismView, ReportView
from opct.evals.contract import Axis, Column, EvalTask, FigureSpec, ReportExperiment, TaskContext, Unit
from opct.evals.template_set import TemplateSet


class HookAxis(Axis):
    """An axis whose views are read off its attributes and methods.

    ``title`` / ``howto`` / ``report_columns`` / ``report_figures`` / ``paper_directions``: its
    :class:`ReportView`. ``inspect`` and ``inspect_values`` / ``inspect_target`` / ``inspect_groups``: its
    :class:`InspectView`. ``organism_cluster_key`` / ``organism_family_key`` / ``organism_validation_families``
    / ``validation_judge`` / ``organism_criteria`` / ``organism_corpus_part``: its :class:`OrganismView`. ``templates`` / ``real_data`` /
    ``cli_options`` / ``data_dir_layout`` / ``unit_key``: its :class:`DataView`. ``judges``: the judge roles
    its tasks ask for, by data source (documentation for its readers). :meth:`pairs` and :meth:`tasks`
    dispatch on the data source to ``organism_*`` and ``real_*``; ``has_pairs`` and ``per_split`` are set
    where they differ from the default (capability: neither).
    """

    title: str = ""
    howto: str = ""
    templates: Mapping[str, TemplateSet] = {}
    judges: Mapping[str, tuple[str, ...]] = {}
    real_data: Mapping[str, str] = {}
    has_pairs: bool = True  # type: ignore[assignment]
    per_split: bool = True  # type: ignore[assignment]
    unit_key: str = ""
    organism_cluster_key: str = ""
    organism_family_key: str = "family"
    organism_validation_families: tuple[str, ...] = ()
    organism_corpus_part: str = ""
    inspect: InspectView = InspectView()
    paper_directions: Mapping[str, tuple[str, str]] = {}
    cli_options: Mapping[str, str] = {}
    data_dir_layout: Mapping[str, str] = {}

    @cached_property
    def views(self) -> tuple[Any, ...]:  # type: ignore[override]
        """Its four views, read off its attributes and methods."""
        inspect = self.inspect
        return (
            ReportView(self.title or self.name.capitalize(), self.howto, self.report_columns, self.report_figures,
                       self.paper_directions),
            InspectView(inspect.cluster, inspect.headline, inspect.description, inspect.evals,
                        self.inspect_values, self.inspect_target, self.inspect_groups),
            OrganismView(self.organism_cluster_key, self.organism_family_key, tuple(self.organism_validation_families),
                         self.validation_judge, self.organism_criteria, self.organism_corpus_part),
            DataView(self.templates, self.real_data, self.cli_options, self.data_dir_layout, self.unit_key),
        )

    def pairs(self, ctx: TaskContext) -> list[dict[str, Any]]:
        """:meth:`organism_pairs` or :meth:`real_pairs`, by ``ctx.source``."""
        if ctx.source == "organism":
            return self.organism_pairs(ctx.split, ctx.world_seed)
        if ctx.source == "real":
            return self.real_pairs(ctx.real, ctx.split, ctx.limit, ctx.columns)
        raise ValueError(f"unknown data source {ctx.source!r}; use 'organism' or 'real'")

    def organism_pairs(self, split: str, seed: int | None = None) -> list[dict[str, Any]]:
        """Consistency pairs of the organism's world for ``split`` (world ``seed``, default the shipped one)."""
        raise NotImplementedError(f"axis {self.name!r} has no organism pairs")

    def real_pairs(self, paths: Mapping[str, str], split: str, limit: int | None = None,
                   columns: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Consistency pairs built from the real data files in ``paths`` (keys of :attr:`real_data`);
        ``columns`` names the columns of the axis's own file, where the axis reads any (sycophancy)."""
        raise NotImplementedError(f"axis {self.name!r} has no real-data pairs")

    def tasks(self, ctx: TaskContext) -> list[EvalTask]:
        """:meth:`organism_tasks` or :meth:`real_tasks`, by ``ctx.source``."""
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
