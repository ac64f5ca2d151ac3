"""Inspect's headline stderr on one cluster: not estimable, so NaN with a warning, never 0.000; on two or
more clusters, Inspect's own clustered standard error."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from inspect_ai import eval as inspect_eval
from inspect_ai.scorer import SampleScore, Score, stderr

from opct.inspect_eval.scoring import clustered_stderr


def _scores(rows: list[tuple[str, float]]) -> list[SampleScore]:
    return [SampleScore(score=Score(value=value), sample_id=i, sample_metadata={"question": cluster})
            for i, (cluster, value) in enumerate(rows)]


def test_one_cluster_has_no_standard_error_and_says_so(caplog):
    one = _scores([("q1", 1.0), ("q1", 0.0), ("q1", 1.0)])  # three answers to one question: one unit
    assert stderr(cluster="question")(one) == 0  # Inspect's own: a reassuring, wrong 0
    with caplog.at_level(logging.WARNING):
        assert math.isnan(clustered_stderr(cluster="question")(one))
    assert "cannot be estimated from fewer than two clusters" in caplog.text
    unscored = _scores([("q1", 1.0), ("q2", math.nan)])  # the second cluster has no scored answer
    assert math.isnan(clustered_stderr(cluster="question")(unscored))


def test_two_clusters_give_inspects_clustered_standard_error():
    rows = _scores([("q1", 1.0), ("q1", 1.0), ("q2", 0.0), ("q3", 1.0), ("q3", 0.0)])
    ours = clustered_stderr(cluster="question")(rows)
    assert ours == stderr(cluster="question")(rows) and ours > 0


def test_a_one_sample_eval_logs_nan_for_its_headline_stderr(tmp_path: Path) -> None:
    (log,) = inspect_eval("opct/sycophancy", model="opct/organism", task_args={"limit": 1, "max_new_tokens": 24},
                          log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    values = {name: m.value for score in log.results.scores for name, m in score.metrics.items()}
    stderrs = [v for name, v in values.items() if name.endswith("stderr")]
    assert stderrs and all(math.isnan(v) for v in stderrs), values
