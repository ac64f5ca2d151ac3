"""Evaluation axes: one package per safety axis, all reached through the :data:`AXES` registry.

An axis (``opct/axes/<name>/``) defines in one place its perturbation templates with named train /
held-out splits (:class:`~opct.axes.base.TemplateSet`), its consistency-pair sources (the organism's
world and real data files), its evaluation tasks for both data sources, the judges those tasks ask
:func:`opct.judges.make_judge` for, and its columns, figures and section in the experiment report.
Everything that iterates axes (``opct eval``, experiments, the organism's pair source, validation
and check, the report, Inspect) goes through :data:`AXES`; the hooks it reads are declared on
:class:`~opct.axes.contract.Axis` (:mod:`opct.axes.contract`, with the eval task and the report column). A package ``opct/axes/<name>/`` whose ``AXIS`` is an :class:`Axis` is
registered as ``<name>`` on import, so a new axis is that one package; an axis defined elsewhere
(a plugin, a test) registers itself::

    AXES.register("honesty", HonestyAxis())

Built in: ``sycophancy`` (biased multiple-choice prompts), ``jailbreak`` (wrapped harmful requests),
``awareness`` (unmentioned safety facts) and ``capability`` (no perturbation, no pairs: accuracy that
consistency training should not cost).
"""

from __future__ import annotations

import pkgutil
from collections.abc import Iterable

from opct.axes.base import TemplateSet
from opct.axes.contract import Axis, FigureSpec
from opct.registry import Registry

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
