"""The opct eval tasks behind an Inspect task: its ``-T`` arguments checked, and the eval tasks they ask
for built (and kept, so the scorer and solver of a task, and ``inspect score`` in another process,
rebuild them from the task's name and arguments alone)."""

from __future__ import annotations

import json
from typing import Any

from opct.axes import AXES
from opct.errors import OpctError
from opct.evals.axis_views import inspect_view
from opct.evals.config import EvalOptions
from opct.evals.contract import EvalTask


def own_tasks() -> dict[str, tuple[str, str]]:
    """``{eval: (its axis, the data source it defaults to)}`` for the evals that get an Inspect task of
    their own (:attr:`opct.evals.axis_views.InspectView.evals`), over every registered axis."""
    return {name: (axis_name, source) for axis_name, axis in AXES.items() for name, source in inspect_view(axis).evals.items()}


class TaskArgumentError(OpctError, ValueError):
    """A ``-T`` argument of an opct task that cannot produce a measurement."""


#: ``-T`` arguments with a fixed set of values.
CHOICES = {"split": ("heldout", "train"), "source": ("organism", "real"), "reasoning": ("strip", "keep")}


def check_task_args(args: dict[str, Any]) -> None:
    """Raise :class:`TaskArgumentError` naming the first ``-T`` argument that cannot produce a measurement."""

    def bad(name: str, why: str) -> TaskArgumentError:
        return TaskArgumentError(f"-T {name}={args[name]!r}: {why}")

    def whole(name: str, least: int) -> None:
        value = args[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise bad(name, f"must be a whole number of at least {least}")

    for name, allowed in CHOICES.items():
        if args.get(name, allowed[0]) not in allowed:
            raise bad(name, f"use {' or '.join(allowed)}")
    whole("max_new_tokens", 1)  # 0 is an error, never "no limit"
    whole("epochs", 1)
    if args.get("limit") is not None:
        whole("limit", 1)
    for name, allowed, fits in (("temperature", "at least 0", lambda v: v >= 0),
                                ("top_p", "in (0, 1]", lambda v: 0 < v <= 1),
                                ("max_unscored", "in [0, 1]", lambda v: 0 <= v <= 1)):
        value = args[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not fits(value):
            raise bad(name, f"must be a number {allowed}")


def eval_tasks_for(axis: str, only: str | None, args: dict[str, Any]) -> list[EvalTask]:
    """The opct eval tasks of ``axis`` (only the one named ``only``, if given) for ``opct eval``'s options."""
    # deferred: loads torch and transformers only when called
    from opct.evals.suite import MissingEvalData, eval_tasks

    options = EvalOptions(
        data=args["source"], splits=[args["split"]], real=dict(args["real"] or {}), data_dir=args["data_dir"],
        judge=args["judge"], limit=args["limit"],
    )
    try:
        tasks = eval_tasks([axis], options, suffix_train=False)
    except MissingEvalData as err:  # worded for opct eval's flags: add Inspect's way of giving the files
        raise TaskArgumentError(f"{err}; under Inspect give the files as -T real='{{key: path}}' (the keys in "
                                "parentheses) or -T data_dir=DIR") from None
    if only is not None:
        tasks = [t for t in tasks if t.name == only]
    if not tasks:
        what = only or axis
        raise OpctError(f"eval {what!r} has no units from source {args['source']!r}; for real data give "
                        f"-T data_dir=DIR or -T real='{{key: path}}'")
    return tasks


def axis_of(task_name: str, args: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    """``(axis, only, the other arguments)`` of an opct Inspect task (an axis, an eval with a task of its
    own, or ``eval`` with ``-T axis=``), its name with or without the ``opct/`` prefix."""
    name = task_name.split("/", 1)[-1]
    args = dict(args)
    if name == "eval":
        return args.pop("axis"), args.pop("only", None), args
    owned = own_tasks()
    if name in owned:
        return owned[name][0], name, args
    return name, None, args


_BUILT: dict[str, dict[str, EvalTask]] = {}


def built_tasks(task_name: str, args: dict[str, Any]) -> dict[str, EvalTask]:
    """The eval tasks of an opct Inspect task by name, built once per process for these arguments."""
    key = json.dumps([task_name, args], sort_keys=True, default=str)
    if key not in _BUILT:
        axis, only, rest = axis_of(task_name, args)
        _BUILT[key] = {t.name: t for t in eval_tasks_for(axis, only, rest)}
    return _BUILT[key]
