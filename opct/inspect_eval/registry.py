"""What the ``inspect_ai`` entry point registers: one ``@task`` per axis and per capability eval, a
generic ``opct/eval`` for any registered axis (plugins included), and the ``opct`` model provider.

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

from opct.errors import OpctError
from opct.evals.task import EvalTask
from opct.inspect_eval.bridge import inspect_task
from opct.inspect_eval.errors import one_line_errors
from opct.inspect_eval.provider import opct_provider  # noqa: F401  (registers the ``opct`` model provider)

#: Capability evals with a task of their own, and the data source they default to.
CAPABILITY_TASKS = {
    "capability_mc": "organism",
    "capability_arithmetic": "organism",
    "capability_chain": "organism",
    "capability_format": "organism",
    "gpqa": "real",
    "math500": "real",
    "ifeval": "real",
    "mmlu": "real",
}


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
    whole("max_new_tokens", 1)  # 0 used to be read as "no limit" and became 512
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
    import opct.builtins  # noqa: F401  (the built-in axes)
    from opct.evals.config import EvalOptions
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


def _task(axis: str, only: str | None, args: dict[str, Any]) -> Task:
    with one_line_errors(f"task opct/{only or axis}"):
        check_task_args(args)
        tasks = eval_tasks_for(axis, only, args)
        return inspect_task(
            tasks, seed=args["seed"], epochs=args["epochs"], temperature=args["temperature"], top_p=args["top_p"],
            max_new_tokens=args["max_new_tokens"], reasoning=args["reasoning"], max_unscored=args["max_unscored"],
            name=only or axis,
        )


def _registered(name: str) -> str:
    """The name to register a task under so that Inspect finds it as ``opct/<name>``.

    Inspect prefixes the package name itself when it sees opct as an installed package; from inside a
    source checkout (``pip install -e .`` leaves ``opct.egg-info`` there, which shadows the installed
    metadata) it does not, so the prefix is written here.
    """
    from inspect_ai._util.package import get_installed_package_name

    return name if get_installed_package_name(eval_tasks_for) == "opct" else f"opct/{name}"


def _make(axis: str, only: str | None, default_source: str, doc: str) -> Callable[..., Task]:
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
        return _task(axis, only, dict(locals()))

    build.__doc__ = doc
    return task(name=_registered(only or axis))(build)


sycophancy = _make("sycophancy", None, "organism", "Sycophancy under biased cues (opct's sycophancy axis).")
jailbreak = _make("jailbreak", None, "organism", "Jailbreak defense under wrapped harmful requests (opct's jailbreak axis).")
awareness = _make("awareness", None, "organism", "Safety awareness: warnings about hazards (opct's awareness axis).")
capability = _make("capability", None, "organism", "Every capability eval of the data source (opct's capability axis).")
CAPABILITY = {name: _make("capability", name, source, f"opct's capability eval {name}.")
              for name, source in CAPABILITY_TASKS.items()}


@task(name=_registered("eval"))
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
    args = dict(locals())
    return _task(args.pop("axis"), args.pop("only"), args)
