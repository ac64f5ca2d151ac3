"""What an axis declares for the results table: its columns and how each reads a metric.

The axes (:mod:`opct.axes`) build their :class:`Column` s here; the table itself
(:mod:`opct.report.table`) gathers them from every registered axis. This module imports no axis.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from opct.report.load import Experiment, Metric

MetricGetter = Callable[[Experiment, str], "Metric | None"]
#: ``(experiment, method) -> ({unit: [values]}, statistic or None)``: one method's values per unit of
#: variation (question, behaviour, fact, item) for the paired differences between methods.
PairedValues = Callable[[Experiment, str], "tuple[dict[str, list[float]], Callable[[list[list[float]]], float] | None]"]


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


def eval_metric(eval_name: str, key: str) -> MetricGetter:
    """Read metric ``key`` of eval ``eval_name`` for a method."""
    return lambda exp, method: exp.metric(method, eval_name, key)


def attack_metric(key: str) -> MetricGetter:
    """Read the adaptive attacker's metric ``key`` against a method."""
    return lambda exp, method: exp.attack_metric(method, key)


def eval_column(
    key: str, title: str, metric: str, *, eval_name: str | None = None, percent: bool = True, better: str = "higher",
    paired: PairedValues | None = None, outcome: str | None = None,
) -> Column:
    """A column showing ``metric`` of eval ``eval_name`` (default: ``key``, an axis's held-out eval);
    ``outcome``: the outcome class its rate counts, if any."""
    name = eval_name or key
    return Column(key, title, eval_metric(name, metric), percent=percent, better=better, paired=paired, eval_name=name,
                  outcome=outcome)
