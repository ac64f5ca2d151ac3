"""What the ``inspect_ai`` entry point registers: one ``@task`` per registered axis and per eval its
:class:`~opct.evals.axis_views.InspectView` gives a task of its own, a generic ``opct/eval`` for any
registered axis (plugins included), and the ``opct`` model provider.

Every task takes the options of ``opct eval`` as ``-T`` arguments, with its defaults: ``split``
(heldout | train), ``source`` (organism | real), ``limit``, ``judge`` (rule | http:<model>),
``data_dir`` (gpqa-diamond/, math-500/, ifeval/, sageeval-test/), ``real`` (a mapping of real-data
paths by key, e.g. ``-T real='{sycophancy_mc: mc.jsonl}'``), ``seed``, ``epochs`` (opct's ``n``),
``temperature``, ``top_p``, ``max_new_tokens``, ``reasoning`` (strip | keep), ``max_unscored``.

A bad argument (``-T max_new_tokens=0``, an unknown source, a missing data file) is an error naming it,
printed as one line (:mod:`opct.inspect_eval.errors`), before any model loads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inspect_ai import Task, task

from opct.axes import AXES
from opct.evals.axis_views import inspect_view
from opct.inspect_eval.bridge import inspect_task
from opct.inspect_eval.errors import one_line_errors
from opct.inspect_eval.names import registered
from opct.inspect_eval.provider import opct_provider  # noqa: F401  (registers the ``opct`` model provider)
from opct.inspect_eval.tasks import (  # noqa: F401  (re-exported: the tasks' arguments and evals)
    TaskArgumentError,
    axis_of,
    check_task_args,
    eval_tasks_for,
    own_tasks,
)


def _task(name: str, args: dict[str, Any]) -> Task:
    with one_line_errors(f"task opct/{name}"):
        check_task_args(args)
        axis, only, _ = axis_of(name, args)
        return inspect_task(
            name, args, seed=args["seed"], epochs=args["epochs"], temperature=args["temperature"], top_p=args["top_p"],
            max_new_tokens=args["max_new_tokens"], reasoning=args["reasoning"], max_unscored=args["max_unscored"],
            name=only or axis,
        )


def _make(axis: str, only: str | None, default_source: str, doc: str) -> Callable[..., Task]:
    task_name = only or axis

    def build(
        split: str = "heldout",
        source: str = default_source,
        limit: int | None = None,
        judge: str = "rule",
        data_dir: str | None = None,
        real: dict[str, str] | None = None,
        seed: int = 0,
        epochs: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 512,
        reasoning: str = "strip",
        max_unscored: float = 0.05,
    ) -> Task:
        args = dict(locals())
        del args["task_name"]  # the enclosing name, not an argument
        return _task(task_name, args)

    build.__doc__ = doc
    return task(name=registered(task_name))(build)


def _axis_tasks() -> dict[str, Callable[..., Task]]:
    """One ``@task`` per registered axis (its :attr:`~opct.evals.axis_views.InspectView.description`), and
    one per eval that has a task of its own."""
    tasks = {name: _make(name, None, "organism", inspect_view(axis).description or f"opct's {name} axis.")
             for name, axis in AXES.items()}
    tasks.update({name: _make(axis, name, source, f"opct's {axis} eval {name}.")
                  for name, (axis, source) in own_tasks().items()})
    return tasks


#: The Inspect tasks of the axes registered when Inspect loads opct (any other axis: ``opct/eval``).
AXIS_TASKS = _axis_tasks()


@task(name=registered("eval"))
def any_axis(
    axis: str,
    only: str | None = None,
    split: str = "heldout",
    source: str = "organism",
    limit: int | None = None,
    judge: str = "rule",
    data_dir: str | None = None,
    real: dict[str, str] | None = None,
    seed: int = 0,
    epochs: int = 1,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_new_tokens: int = 512,
    reasoning: str = "strip",
    max_unscored: float = 0.05,
) -> Task:
    """Any registered opct axis (``-T axis=<name>``, plugins included); ``only`` keeps one of its evals."""
    return _task("eval", dict(locals()))
