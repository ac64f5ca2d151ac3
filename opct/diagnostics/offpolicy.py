r"""The off-policy profile: how far BCT's targets are from what the student does on the cued prompt.

For each consistency pair, with the *student* on ``prompt`` (the run-start model: at the start of a
run it is the frozen teacher itself) and the *teacher* on ``teacher_prompt``:

* the **target** is the teacher's greedy answer to ``teacher_prompt`` (what BCT trains on, with its
  default greedy targets); the **answer** is the student's greedy answer to ``prompt``; the **samples**
  are the student's own answers to ``prompt`` at temperature 1 (its policy);
* the **decision token** is the first position where target and answer differ (the shorter length when
  one is a prefix of the other); a pair whose answer equals its target has none.

Measures, per axis (a pair's ``axis``; every one an :class:`~opct.stats.estimate.Estimate` with its
``n``, the pairs, samples or tokens it is over):

=============================  =================================================================
``greedy_equals_target``       share of pairs whose answer is token for token the target
``divergence_position``        mean index of the decision token (0 = the first answer token)
``target_prob_at_divergence``  the student's probability of the target's token at the decision token
``target_rank_at_divergence``  median rank of that token in the student's distribution (1 = its top)
``target_seq_logprob``         the student's log-probability of the whole target (mean; ``_median``)
``own_seq_logprob``            the student's log-probability of its own samples (mean; ``_median``)
``target_seq_prob_under_0.1``  share of pairs whose target has sequence probability < 0.1 under the student
``own_seq_prob_under_0.1``     the same share over the student's own samples
``target_nll_per_token``       the student's NLL of the target tokens, per token (token-weighted)
``own_nll_per_token``          the same of its own samples' tokens
``target_cost_after_divergence``  the student's NLL per token of the target after the decision token
``teacher_entropy``            the teacher's next-token entropy over the target, per token (nats)
``teacher_top1_at_divergence``    the teacher's top-1 probability at the decision token
``target_percentile_among_own``   where the target's sequence log-prob falls among the student's own
                               samples', in percent (mean over pairs; :func:`target_percentile`)
=============================  =================================================================

The last two rows of the table are the dose that can move with diversity (docs/mechanism.md, "A dose
that can move with diversity"; added after the study, not pre-registered): the pre-registered dose,
``own_seq_logprob − target_seq_logprob``, is the target's surprisal minus the student's entropy, and falls
by construction as valid responses multiply; a mode's *rank* among the samples, and what the target
costs once it has left the student's answer, need not. Per pair, :func:`pair_record` gives both
(:func:`target_percentile`, :func:`cost_after_decision`); ``opct pairs profile --out`` writes them.

"Share under 0.1" is a statement about whole sequences: :math:`\pi(y \mid x) = \prod_t \pi(y_t \mid x,
y_{<t}) < 0.1`, i.e. the student would write that exact answer less than one time in ten.

What is left out, and counted (``unscored``): a sequence cut off at the token limit counts in no
sequence-level measure (``greedy_equals_target``, the sequence log-probs and shares, the per-token
NLLs) since its end is unknown; a pair with no decision token counts in none of the decision-token
measures. Intervals resample *clusters*: the pairs sharing one ``teacher_prompt`` share one target,
so they are one unit (:func:`~opct.stats.estimate.clustered_mean`, :func:`~opct.stats.intervals.cluster_rate`,
and a cluster bootstrap of medians).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opct.stats.estimate import Estimate, bootstrap, clustered_mean, group_rows
from opct.stats.intervals import cluster_rate

#: The sequence probability under which a sequence counts as one the student would rarely write.
UNLIKELY = 0.1

#: Each measure's key and how a table names it, in the order tables show them.
MEASURES: dict[str, str] = {
    "greedy_equals_target": "greedy answer = target (share)",
    "divergence_position": "decision token: position (mean)",
    "target_prob_at_divergence": "target's probability there (mean)",
    "target_rank_at_divergence": "target's rank there (median)",
    "teacher_top1_at_divergence": "teacher's top-1 mass there (mean)",
    "target_seq_logprob": "target: sequence log-prob (mean)",
    "target_seq_logprob_median": "target: sequence log-prob (median)",
    "own_seq_logprob": "own T=1 samples: sequence log-prob (mean)",
    "own_seq_logprob_median": "own T=1 samples: sequence log-prob (median)",
    "target_seq_prob_under_0.1": "target: share with sequence prob < 0.1",
    "own_seq_prob_under_0.1": "own samples: share with sequence prob < 0.1",
    "target_nll_per_token": "target: NLL per token",
    "own_nll_per_token": "own samples: NLL per token",
    "target_cost_after_divergence": "target: NLL per token after the decision token",
    "teacher_entropy": "teacher's entropy on the clean prompt (nats/token)",
    "target_percentile_among_own": "target's percentile among own samples (mean)",
}
#: The two measures of the dose that can move with diversity (added after the study; docs/mechanism.md).
DIVERSITY_DOSE = ("target_percentile_among_own", "target_cost_after_divergence")


def first_divergence(target: Sequence[int], answer: Sequence[int]) -> int | None:
    """The first index where ``target`` and ``answer`` differ; the shorter length when one is a prefix
    of the other; ``None`` when they are equal."""
    for i, (a, b) in enumerate(zip(target, answer, strict=False)):
        if a != b:
            return i
    return None if len(target) == len(answer) else min(len(target), len(answer))


def target_percentile(target_seq_logprob: float, own_seq_logprobs: Sequence[float]) -> float | None:
    """Where a target's sequence log-prob falls among the student's own samples' sequence log-probs, in percent:
    100 × (samples below it + half the samples equal to it) / samples (the mid-rank percentile), so 100 means
    the target is likelier than every sample and 0 less likely than every one; None without samples."""
    if not own_seq_logprobs:
        return None
    below = sum(s < target_seq_logprob for s in own_seq_logprobs)
    ties = sum(s == target_seq_logprob for s in own_seq_logprobs)
    return 100.0 * (below + 0.5 * ties) / len(own_seq_logprobs)


def nll_after_decision(target_logprobs: Sequence[float], divergence: int | None) -> list[float]:
    """The student's NLL of each target token after the decision token (none without one)."""
    return [] if divergence is None else [-lp for lp in target_logprobs[divergence + 1:]]


def cost_after_decision(target_logprobs: Sequence[float], divergence: int | None) -> float | None:
    """The target's mean NLL per token after the decision token (nats/token), or None when no token follows it."""
    nll = nll_after_decision(target_logprobs, divergence)
    return sum(nll) / len(nll) if nll else None


@dataclass
class PairProfile:
    """What the forward passes found for one pair (every log-prob is the student's after ``prompt``)."""

    pair_id: str
    axis: str
    cluster: Hashable
    target: list[int]
    target_truncated: bool
    answer: list[int]
    answer_truncated: bool
    target_logprobs: list[float]  # log pi_student(target_t | prompt, target_<t)
    teacher_entropy: list[float]  # entropy of pi_teacher(. | teacher_prompt, target_<t), one per target token
    target_rank_at_divergence: int | None = None  # 1 = the student's most likely token there
    teacher_top1_at_divergence: float | None = None
    sample_logprobs: list[list[float]] = field(default_factory=list)  # the student's own samples, per token
    sample_truncated: list[bool] = field(default_factory=list)

    @property
    def divergence(self) -> int | None:
        """The decision token's index in the target, or ``None`` (no divergence, or none inside the target)."""
        d = first_divergence(self.target, self.answer)
        return d if d is not None and d < len(self.target) else None

    @property
    def complete(self) -> bool:
        """Target and answer both ended before the token limit (their sequence-level measures are defined)."""
        return not self.target_truncated and not self.answer_truncated

    @property
    def own_seq_logprobs(self) -> list[float]:
        """The sequence log-probs of the student's own samples that ended before the token limit."""
        return [sum(lp) for lp, cut in zip(self.sample_logprobs, self.sample_truncated, strict=True) if not cut and lp]

    @property
    def target_percentile(self) -> float | None:
        """:func:`target_percentile` of the whole target among the own samples; None when the target was cut off."""
        return None if self.target_truncated else target_percentile(sum(self.target_logprobs), self.own_seq_logprobs)


def pair_record(p: PairProfile) -> dict[str, Any]:
    """One pair's dose that can move with diversity, as JSON: its decision token, the target's and its own
    complete samples' sequence log-probs, the target's percentile among them and its cost after the decision."""
    return {"pair_id": p.pair_id, "axis": p.axis, "decision_token": p.divergence,
            "target_seq_logprob": None if p.target_truncated else sum(p.target_logprobs),
            "own_seq_logprobs": p.own_seq_logprobs, "target_percentile_among_own": p.target_percentile,
            "target_cost_after_divergence": cost_after_decision(p.target_logprobs, p.divergence)}


def _median_estimate(values: Sequence[float], clusters: Sequence[Hashable]) -> Estimate:
    rows = list(zip(clusters, values, strict=True))
    units = group_rows(rows, key=lambda r: r[0])
    est = bootstrap(units, lambda us: statistics.median(v for u in us for _, v in u))
    return Estimate(est.value, est.ci_low, est.ci_high, len(values), est.method, clusters=len(units))


def _mean(values: Sequence[float], clusters: Sequence[Hashable]) -> Estimate:
    est = clustered_mean(list(values), list(clusters))
    return Estimate(est.value, est.ci_low, est.ci_high, est.n, est.method, clusters=len(set(clusters)))


def _measures_of(profiles: Sequence[PairProfile]) -> dict[str, Estimate]:
    complete = [p for p in profiles if p.complete]
    diverging = [p for p in profiles if p.divergence is not None]
    samples = [(p.cluster, lp) for p in profiles for lp, cut in zip(p.sample_logprobs, p.sample_truncated, strict=True)
               if not cut and lp]
    after = [(p.cluster, nll) for p in diverging for nll in nll_after_decision(p.target_logprobs, p.divergence)]
    ranked = [(p.cluster, v) for p in profiles if (v := p.target_percentile) is not None]
    full_targets = [p for p in profiles if not p.target_truncated]
    target_seq = [sum(p.target_logprobs) for p in full_targets]
    own_seq = [sum(lp) for _, lp in samples]
    out: dict[str, Estimate] = {
        "greedy_equals_target": cluster_rate([p.target == p.answer for p in complete], [p.cluster for p in complete]),
        "divergence_position": _mean([float(p.divergence) for p in diverging], [p.cluster for p in diverging]),
        "target_prob_at_divergence": _mean([math.exp(p.target_logprobs[p.divergence]) for p in diverging],  # type: ignore[index]
                                           [p.cluster for p in diverging]),
        "target_rank_at_divergence": _median_estimate([float(p.target_rank_at_divergence or 0) for p in diverging],
                                                      [p.cluster for p in diverging]),
        "teacher_top1_at_divergence": _mean([p.teacher_top1_at_divergence or 0.0 for p in diverging],
                                            [p.cluster for p in diverging]),
        "target_seq_logprob": _mean(target_seq, [p.cluster for p in full_targets]),
        "target_seq_logprob_median": _median_estimate(target_seq, [p.cluster for p in full_targets]),
        "own_seq_logprob": _mean(own_seq, [c for c, _ in samples]),
        "own_seq_logprob_median": _median_estimate(own_seq, [c for c, _ in samples]),
        "target_seq_prob_under_0.1": cluster_rate([s < math.log(UNLIKELY) for s in target_seq],
                                                  [p.cluster for p in full_targets]),
        "own_seq_prob_under_0.1": cluster_rate([s < math.log(UNLIKELY) for s in own_seq], [c for c, _ in samples]),
        "target_nll_per_token": _mean([-lp for p in full_targets for lp in p.target_logprobs],
                                      [p.cluster for p in full_targets for _ in p.target_logprobs]),
        "own_nll_per_token": _mean([-t for _, lp in samples for t in lp], [c for c, lp in samples for _ in lp]),
        "target_cost_after_divergence": _mean([v for _, v in after], [c for c, _ in after]),
        "teacher_entropy": _mean([h for p in profiles for h in p.teacher_entropy],
                                 [p.cluster for p in profiles for _ in p.teacher_entropy]),
        "target_percentile_among_own": _mean([v for _, v in ranked], [c for c, _ in ranked]),
    }
    return out


def summarize(profiles: Sequence[PairProfile], settings: dict[str, Any] | None = None,
              per_pair: bool = False) -> dict[str, Any]:
    """The profile as JSON-ready data: per axis, the counts (pairs, truncated targets, answers and samples,
    pairs without a decision token) and every measure of :data:`MEASURES` as an estimate record; with
    ``per_pair``, also a list ``per_pair``: each pair's :func:`pair_record`."""
    axes: dict[str, Any] = {}
    for axis in sorted({p.axis for p in profiles}):
        mine = [p for p in profiles if p.axis == axis]
        axes[axis] = {
            "pairs": len(mine),
            "clusters": len({p.cluster for p in mine}),
            "truncated_targets": sum(p.target_truncated for p in mine),
            "truncated_answers": sum(p.answer_truncated for p in mine),
            "samples": sum(len(p.sample_truncated) for p in mine),
            "truncated_samples": sum(sum(p.sample_truncated) for p in mine),
            "no_decision_token": sum(p.divergence is None for p in mine),
            "measures": {k: e.to_dict() for k, e in _measures_of(mine).items()},
        }
    return {**(settings or {}), "axes": axes, **({"per_pair": [pair_record(p) for p in profiles]} if per_pair else {})}


def _cell(est: dict[str, Any]) -> str:
    value, lo, hi, n = est.get("value"), est.get("ci_low"), est.get("ci_high"), est.get("n", 0)
    if value is None or not n or (isinstance(value, float) and math.isnan(value)):
        return "n=0"
    fmt: Callable[[float], str] = (lambda x: f"{x:.3g}") if abs(value) < 1000 else (lambda x: f"{x:.0f}")
    interval = "" if lo is None or hi is None or math.isnan(lo) or math.isnan(hi) else f" [{fmt(lo)}, {fmt(hi)}]"
    return f"{fmt(value)}{interval} n={n}"


def table_rows(profile: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A profile (:func:`summarize`'s data) as a table: the header (measure, then one column per axis)
    and one row per measure, each cell ``value [95% interval] n=...``; the first rows are the counts."""
    axes = profile.get("axes", {})
    names = sorted(axes)
    header = ["measure", *names]
    rows = [
        ["pairs (clusters)", *(f"{axes[a]['pairs']} ({axes[a]['clusters']})" for a in names)],
        ["cut off at the token limit: targets / answers / samples",
         *(f"{axes[a]['truncated_targets']} / {axes[a]['truncated_answers']} / "
           f"{axes[a]['truncated_samples']} of {axes[a]['samples']}" for a in names)],
    ]
    for key, label in MEASURES.items():
        if not any(key in axes[a]["measures"] for a in names):
            continue  # a profile measured before the measure existed: no row rather than n=0
        rows.append([label, *(_cell(axes[a]["measures"].get(key, {})) for a in names)])
    return header, rows


def diversity_dose_summary(profile: dict[str, Any]) -> str:
    """The dose that can move with diversity in one line, per profiled axis: the target's percentile among the
    own samples (mean over pairs) and its NLL per token after the decision token (docs/mechanism.md)."""
    axes = profile.get("axes", {})

    def value(axis: str, key: str, fmt: str) -> str:
        est = axes[axis]["measures"].get(key, {})
        v = est.get("value")
        return "—" if v is None or not est.get("n") or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    parts = [f"{a} {value(a, DIVERSITY_DOSE[0], '.1f')} / {value(a, DIVERSITY_DOSE[1], '.3f')}" for a in sorted(axes)]
    return ("dose that can move with diversity (added after the study, not pre-registered; docs/mechanism.md), "
            "target's percentile among own samples / its cost after the decision token, nats/token: "
            + (", ".join(parts) or "no axis profiled"))


def truncation_notes(profile: dict[str, Any]) -> list[str]:
    """One line per group (axis or source) whose every target was cut at the token limit: its sequence measures
    have no pair (n=0), and the way out is a longer limit."""
    limit = profile.get("max_new_tokens")
    notes = []
    for name, group in sorted(profile.get("axes", {}).items()):
        if group["pairs"] and group["truncated_targets"] == group["pairs"]:
            notes.append(
                f"{name}: all {group['pairs']} targets were cut at the token limit ({limit} tokens), so every measure "
                f"of a whole target has n=0: raise --max-new-tokens (e.g. to {2 * limit if limit else 'twice it'}) "
                "until most targets end"
            )
    return notes
