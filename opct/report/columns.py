"""How an axis's results-table :class:`~opct.evals.contract.Column` reads a metric: of one of its evals,
or of the adaptive attacker. The table (:mod:`opct.report.table`) gathers the columns from every
registered axis. This module imports no axis.
"""

from __future__ import annotations

from opct.evals.contract import Column, MetricGetter, PairedValues


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
