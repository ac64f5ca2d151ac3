"""Evaluation axes: one package per safety axis, all reached through the :data:`AXES` registry.

An axis (``opct/axes/<name>/``) defines in one place its perturbation templates with named train /
held-out splits (:class:`~opct.axes.base.TemplateSet`), its consistency-pair sources (the organism's
world and real data files), its evaluation tasks for both data sources, the judges those tasks ask
:func:`opct.judges.make_judge` for, and its columns, figures and section in the experiment report.
Everything that iterates axes (``opct eval``, experiments, the organism's pair source, the report)
goes through :data:`AXES`. A package ``opct/axes/<name>/`` whose ``AXIS`` is an :class:`Axis` is
registered as ``<name>`` on import, so a new axis is that one package; an axis defined elsewhere
(a plugin, a test) registers itself::

    AXES.register("honesty", HonestyAxis())

Built in: ``sycophancy`` (biased multiple-choice prompts), ``jailbreak`` (wrapped harmful requests),
``awareness`` (unmentioned safety facts) and ``capability`` (no perturbation, no pairs: accuracy that
consistency training should not cost).
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from opct.axes.base import TemplateSet
from opct.registry import Registry

if TYPE_CHECKING:
    from opct.evals.task import EvalTask, TaskContext
    from opct.report.columns import Column
    from opct.report.load import Experiment

#: A figure the report draws: ``(file stem, draw)``; ``draw`` returns a matplotlib Figure or None.
FigureSpec = tuple[str, Callable[[], Any]]


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

    def report_columns(self, exp: Experiment) -> list[Column]:
        """The axis's columns in the report's results table."""
        return []

    def report_figures(self, exp: Experiment) -> list[FigureSpec]:
        """The figures of the axis's report section."""
        return []


#: Every axis by name, in registration order (the order of the report's columns and sections): the
#: built-in ones, capability, then every other package under ``opct/axes/`` (its ``AXIS``), by name.
AXES: Registry[Axis] = Registry("axis")
for _name in ("sycophancy", "jailbreak", "awareness", "capability"):
    AXES.register(_name, f"opct.axes.{_name}:AXIS")


def register_packages(paths: Iterable[str], package: str) -> list[str]:
    """Register (lazily) the ``AXIS`` of every subpackage of ``package`` found in ``paths`` whose name
    is not registered yet, in name order; returns the names registered."""
    found = sorted(m.name for m in pkgutil.iter_modules(list(paths)) if m.ispkg and m.name not in AXES)
    for name in found:
        AXES.register(name, f"{package}.{name}:AXIS")
    return found


register_packages(__path__, __name__)


def pair_axes() -> list[str]:
    """The registered axes that have consistency pairs (the ones an experiment can train on)."""
    return [name for name, axis in AXES.items() if axis.has_pairs]


__all__ = ["AXES", "Axis", "FigureSpec", "TemplateSet", "pair_axes", "register_packages"]
