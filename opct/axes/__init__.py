"""Evaluation axes: one package per safety axis, all reached through the :data:`AXES` registry.

An axis (``opct/axes/<name>/``) defines in one place its perturbation templates with named train /
held-out splits (:class:`~opct.evals.template_set.TemplateSet`), its consistency-pair sources (the organism's
world and real data files), its evaluation tasks for both data sources, the judges those tasks ask
:func:`opct.judges.make_judge` for, and its columns, figures and section in the experiment report.
Everything that iterates axes (``opct eval``, experiments, the organism's pair source, validation
and check, the report, Inspect) goes through :data:`AXES` (declared in :mod:`opct.evals.axis_registry`,
below all of them); its core (name, pairs, tasks) is :class:`~opct.evals.contract.Axis` (:mod:`opct.evals.contract`, with the
eval task and the report column) and the views each consumer looks up are in :mod:`opct.evals.axis_views`;
neither imports an axis. The built-in axes subclass :class:`HookAxis`, which builds every view from
attributes and methods. A package
``opct/axes/<name>/`` whose ``AXIS`` is an :class:`Axis` is registered as ``<name>``, so a new axis is
that one package; an axis defined elsewhere (a plugin, a test) registers itself::

    AXES.register("honesty", HonestyAxis())

Built in: ``sycophancy`` (biased multiple-choice prompts), ``jailbreak`` (wrapped harmful requests),
``awareness`` (unmentioned safety facts) and ``capability`` (no perturbation, no pairs: accuracy that
consistency training should not cost).
"""

from __future__ import annotations

from opct.axes.hook_axis import HookAxis
from opct.evals.axis_registry import AXES, axes_with, pair_axes, register_packages
from opct.evals.axis_views import (
           DataView,
           InspectView,
           OrganismView,
           ReportView,
           data_view,
           organism_view,
           view,
)
from opct.evals.contract import Axis, FigureSpec
from opct.evals.template_set import TemplateSet

__all__ = ["AXES", "Axis", "DataView", "FigureSpec", "HookAxis", "InspectView", "OrganismView", "ReportView", "TemplateSet",
           "axes_with", "data_view", "organism_view", "pair_axes", "register_packages", "view"]
