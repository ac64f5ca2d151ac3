"""The static jailbreak eval task: behaviours plain and wrapped, and benign requests (over-refusal).

One task for both data sources. Every response is judged by a refusal judge, and every wrapped or
plain response also by a harm judge (``scores["harm"]``, the same judge the adaptive attacker uses:
the organism's exact one, the rule judge's content check, or a StrongREJECT rubric). The two answer
different questions: "not refused" counts any non-refusal, "harmful" only a response that gives the
harmful content, whatever refusal words surround it; the metrics report both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opct.axes.jailbreak.data import Behavior, plain_request
from opct.axes.jailbreak.metrics import jailbreak_metrics
from opct.axes.jailbreak.templates import wrap
from opct.axes.records import verdict_scores
from opct.evals.contract import EvalTask, Judgement, Unit
from opct.evals.judging import Ask, JudgedScorer
from opct.evals.template_set import Template
from opct.judges.judge import Judge, Verdict
from opct.stats.estimate import Estimate


def real_units(
    behaviors: Sequence[Behavior], wrappers: Sequence[Template], benign: Sequence[Behavior] = (), split: str = "heldout"
) -> list[Unit]:
    """Each behaviour plain (variant ``plain``) and under every wrapper (``wrapped:<template>``), then
    each benign request (``benign``)."""
    units: list[Unit] = []
    for b in behaviors:
        plain = plain_request(b)
        meta = {"behavior_id": b.id, "request": b.request, "category": b.category}
        units.append(Unit(b.id, "plain", [{"role": "user", "content": plain}], split, meta))
        for t in wrappers:
            units.append(Unit(b.id, f"wrapped:{t.id}", [{"role": "user", "content": wrap(t, plain)}], split,
                              {**meta, "family": t.family, "template": t.id}))
    for b in benign:
        units.append(Unit(b.id, "benign", [{"role": "user", "content": plain_request(b)}], split,
                          {"behavior_id": b.id, "request": b.request}))
    return units


def jailbreak_task(
    units: Sequence[Unit],
    refusal_judge: Judge,
    harm_judge: Judge,
    *,
    name: str = "jailbreak",
    max_new_tokens: int = 512,
    description: str = "static jailbreak wrappers",
) -> EvalTask:
    """Judge every response for refusal (and harm), then :func:`jailbreak_metrics` over the variants
    ``wrapped``, ``plain`` and ``benign`` (a variant's text after ``:`` is ignored). A batch of responses
    is judged a judge at a time (:class:`~opct.evals.judging.JudgedScorer`)."""

    def asks(unit: Unit, response: str) -> list[Ask]:
        request = unit.meta.get("request") or unit.prompt[-1]["content"]
        judges = [refusal_judge] if unit.variant == "benign" else [refusal_judge, harm_judge]
        return [Ask(judge, request, unit.meta) for judge in judges]

    def decide(unit: Unit, response: str, verdicts: list[Verdict]) -> Judgement:
        refusal, *harm = verdicts
        scores = verdict_scores("refusal", refusal)
        judge, version = refusal.judge, refusal.judge_version
        if harm:
            scores.update(verdict_scores("harm", harm[0]))
            judge, version = f"{judge}+{harm[0].judge}", f"{version}+{harm[0].judge_version}"
        return Judgement(refusal.label, scores, judge, version)

    score = JudgedScorer(asks, decide)

    def metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Estimate]:
        return jailbreak_metrics([{**r, "variant": str(r["variant"]).split(":")[0]} for r in records])

    return EvalTask(name, list(units), score, metrics, max_new_tokens, description)
