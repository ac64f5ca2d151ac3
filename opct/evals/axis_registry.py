"""The registry of axes, :data:`AXES`, declared below everything that iterates it.

Evals, the report, the organism (its pairs, check and validation) and the entry points read every axis
through :data:`AXES` and the hooks of :class:`~opct.evals.contract.Axis`; none of them imports an axis
package. The axis packages under ``opct/axes/`` are registered here as ``"opct.axes.<name>:AXIS"`` strings,
imported on first use, so this module imports no axis: the built-in ones first (the order of the report's
columns and sections), then every other package found under ``opct/axes/``, by name. An axis defined
elsewhere (a plugin, a test) registers itself: ``AXES.register("honesty", HonestyAxis())``. Validation's
``organism`` judge, :func:`judge_behaviour`, asks each axis's own validation judge here.
"""

from __future__ import annotations

import importlib.util
import pkgutil
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from opct.evals.axis_views import OrganismView, view
from opct.evals.contract import Axis
from opct.registry import Registry

#: The package whose subpackages are the axes (each one's ``AXIS``).
AXIS_PACKAGE = "opct.axes"
#: The built-in axes, in the order of the report's columns and sections.
BUILT_IN_AXES = ("sycophancy", "jailbreak", "awareness", "capability")

#: Every axis by name, in registration order.
AXES: Registry[Axis] = Registry("axis")
for _name in BUILT_IN_AXES:
    AXES.register(_name, f"{AXIS_PACKAGE}.{_name}:AXIS")


def register_packages(paths: Iterable[str], package: str) -> list[str]:
    """Register (lazily) the ``AXIS`` of every subpackage of ``package`` found in ``paths`` whose name
    is not registered yet, in name order; returns the names registered."""
    found = sorted(m.name for m in pkgutil.iter_modules(list(paths)) if m.ispkg and m.name not in AXES)
    for name in found:
        AXES.register(name, f"{package}.{name}:AXIS")
    return found


def axis_package_paths() -> list[str]:
    """The folders of :data:`AXIS_PACKAGE`, found without importing it."""
    spec = importlib.util.find_spec(AXIS_PACKAGE)
    return list(spec.submodule_search_locations or []) if spec else []


register_packages(axis_package_paths(), AXIS_PACKAGE)


V = TypeVar("V")


def judge_behaviour(axis: str, metas: Sequence[dict[str, Any]], answers: Sequence[str]) -> list[bool | None]:
    """Validation's ``organism`` judge (:data:`opct.training.plugins.VALIDATION_JUDGES`, registered in
    :mod:`opct.wiring`): whether each answer to a validation prompt does what the teacher would do on the clean
    prompt (True), not (False) or unscored (None), by ``axis``'s :attr:`~opct.evals.axis_views.OrganismView.validation_judge`.
    An empty answer, an axis without the view, or one that is not registered, is unscored."""
    found = view(AXES.get(axis), OrganismView) if axis in AXES else None
    judge = found.validation_judge if found is not None else None
    return [None if judge is None or not answer.strip() else judge(meta, answer)
            for meta, answer in zip(metas, answers, strict=True)]


def axes_with(kind: type[V]) -> list[tuple[str, V]]:
    """Each registered axis that gives a view of type ``kind`` (:mod:`opct.evals.axis_views`), with that view,
    in registration order; the others are skipped."""
    return [(name, found) for name, axis in AXES.items() if (found := view(axis, kind)) is not None]


def pair_axes() -> list[str]:
    """The registered axes that have consistency pairs (the ones an experiment can train on)."""
    return [name for name, axis in AXES.items() if axis.has_pairs]
