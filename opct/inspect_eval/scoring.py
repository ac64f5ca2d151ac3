"""What an opct task reports under Inspect, in Inspect's terms: a sample's ``target``, its cluster and
slice, a few headline values per answer, and their metrics.

Each axis may give its view (:class:`~opct.evals.axis_views.InspectView`; an axis without one gets the
default view): a few headline values per answer (1, 0, or NaN where the value does
not apply to the answer, or the answer is unscored: Inspect leaves NaN out), each reported as Inspect's
``mean()`` with a ``stderr(cluster=...)`` clustered on the axis's unit of variation (a question, a
behaviour, a fact, an item; :func:`clustered_stderr`: Inspect's, but NaN with a warning where the samples
hold one cluster, from which no standard error can be estimated), and the first of them also per slice (a cue or wrapper family, a variant,
an eval) with ``grouped(mean(), "slice")``. opct's own
metrics, with their cluster-Wilson intervals, come from ``opct report LOG`` (:mod:`opct.inspect_eval.logs`),
recomputed from the records each score carries.

``opct_status`` adds the number of records, the unscored ones and ``incomplete`` (1 when the
unscored share is over ``max_unscored``), over the samples evaluated (all of them, or ``--limit``'s).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from inspect_ai.scorer import Metric, SampleScore, grouped, mean, metric, stderr

from opct.axes import AXES
from opct.evals.axis_views import InspectView, inspect_view
from opct.evals.contract import EvalTask, Unit
from opct.inspect_eval.names import registered

NAN = math.nan
_log = logging.getLogger(__name__)


def _view(name: str) -> InspectView:
    """The :class:`InspectView` of axis ``name`` (the default one where it gives none)."""
    return inspect_view(AXES.get(name))


def sample_target(axis: str, unit: Unit) -> str:
    """A unit's Inspect ``target``, as its axis gives it (:meth:`~opct.evals.axis_views.InspectView.target`):
    the gold answer where there is one, an expected behaviour, a safety fact; empty where an eval has none."""
    return _view(axis).target(unit)


def sample_groups(axis: str, eval_name: str, unit: Unit) -> dict[str, str]:
    """A sample's cluster (metadata key :attr:`~opct.evals.axis_views.InspectView.cluster`) and ``slice``
    (its grouped metric's group)."""
    return _view(axis).groups(eval_name, unit)


def score_value(axis: str, task: EvalTask, rec: Mapping[str, Any], unit: Unit) -> dict[str, float]:
    """A record's headline values; all NaN (left out by Inspect) when its outcome is unscored."""
    owner = _view(axis)
    if rec["outcome"] in task.unscored_classes:
        return dict.fromkeys(owner.headline, NAN)
    return owner.values(rec, unit)


@metric(name=registered("opct_status"))
def opct_status(unscored_classes: list[str], max_unscored: float = 0.05) -> Metric:
    """``records``, ``unscored`` (their outcome is one of ``unscored_classes``) and ``incomplete``
    (1 when the unscored share is over ``max_unscored``), over every record of the samples evaluated."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        outcomes = [s.score.metadata["opct_record"]["outcome"] for s in scores
                    if s.score.metadata and "opct_record" in s.score.metadata]
        unscored = sum(o in unscored_classes for o in outcomes)
        return {"records": float(len(outcomes)), "unscored": float(unscored),
                "incomplete": float(not outcomes or unscored / len(outcomes) > max_unscored)}

    return compute


@metric(name=registered("stderr"))
def clustered_stderr(cluster: str) -> Metric:
    """Inspect's clustered ``stderr(cluster=...)``, except where the scored samples (NaN values left out) hold
    fewer than two clusters: a standard error cannot be estimated from one cluster, so the value is NaN (shown
    as ``nan``, never a reassuring 0.000) and a warning says why."""
    inspect_stderr = stderr(cluster=cluster)

    def compute(scores: list[SampleScore]) -> float:
        scored = [s for s in scores if isinstance(s.score.value, int | float) and not math.isnan(s.score.value)]
        clusters = {(s.sample_metadata or {}).get(cluster) for s in scored}
        if len(clusters) < 2:
            _log.warning("stderr: the scored samples hold %s %s cluster(s); a standard error cannot be estimated "
                         "from fewer than two clusters (nan). Evaluate more samples (--limit).", len(clusters), cluster)
            return NAN
        return float(inspect_stderr(scores))

    return compute


def task_metrics(axis: str, tasks: Mapping[str, EvalTask], max_unscored: float) -> list[Any]:
    """The metrics of an opct task: each headline's mean and clustered stderr, the first headline
    per slice, and :func:`opct_status`."""
    axis_view = _view(axis)
    headline: dict[str, list[Metric]] = {}
    for i, key in enumerate(axis_view.headline):
        headline[key] = [mean(), clustered_stderr(cluster=axis_view.cluster)]
        if i == 0:
            headline[key].append(grouped(mean(), "slice", all=False))
    unscored = sorted({c for t in tasks.values() for c in t.unscored_classes})
    return [headline, opct_status(unscored, max_unscored)]
