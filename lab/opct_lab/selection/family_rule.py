"""Recipe selection's third rule, ``family_transfer``: transfer to perturbation families training never saw.

The rule reads the *family validation* split (:mod:`opct.organism.pairs`: one or two whole training-side
families per axis, held back from training; never a held-out test family) and is the same for every
method (it never reads a method's own loss):

* each axis's score is its judged good-behaviour rate on the held-back families (``famval_good/<axis>``,
  measured by :mod:`opct.training.validation` with the other validation measurements);
* for jailbreaks, that rate is averaged with the *defended rate* of a small adaptive attack (the search
  attacker, :mod:`opct.attack.search`, ``budget`` queries per behaviour) on the validation behaviours
  (the ``val`` split's behaviours: no training pair asks about them) with every non-held-out wrapper
  family. An unscored behaviour (a reply cut off or empty on every attempt that was not a crack) counts in
  neither the numerator nor the denominator and is recorded beside the rate;
* the score is the mean over axes, then over seeds.

An attack at every checkpoint would cost as much as the training, so the attack runs only on each
candidate's ``top`` best checkpoints by the rest of the rule (the held-back families' rate), on every
seed; the rule picks among those, and what the attacks cost (queries, seconds) is written into
``selection.json``. Candidates keep every checkpoint while this attack is on (``train.keep_checkpoints``).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from pydantic import ConfigDict, Field

from opct.attack.grammar import Wrapper
from opct.attack.organism_behaviors import organism_behaviors
from opct.attack.results import outcome_counts, write_attack_results
from opct.attack.scorers import make_scorer
from opct.attack.search import SearchAttacker, SearchConfig
from opct.axes.jailbreak.templates import ORGANISM, wrap
from opct.config import DeclaredRanges, GenerationConfig, RunConfig
from opct.organism.pairs import build_pairs
from opct.runs.layout import RunLayout

RULE = ("highest family-validation score among eligible (candidate, step): the judged good-behaviour rate on the "
        "held-back training families (organism:<axis>:famval), the jailbreak axis's rate averaged with the defended "
        "rate of a small adaptive attack on the validation behaviours (run on each candidate's best `top` checkpoints "
        "by the rest of the rule, every seed); mean over axes, then seeds; ties: lower teacher-KL, then fewer steps")


class FamilyAttackSettings(DeclaredRanges):
    """The adaptive attack of the ``family_transfer`` rule (``selection.family_attack``)."""
    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="attack the validation behaviours (else the rule reads the famval rates alone)")
    budget: int = Field(8, gt=0, description="target queries per validation behaviour")
    top: int = Field(2, gt=0, description="checkpoints attacked per candidate: its best by the held-back families' rate")
    max_new_tokens: int = Field(48, gt=0, description="the target's greedy replies")
    sequences_per_call: int = Field(96, gt=0, description="sequences per generate() call (memory, not results)")


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values and not any(math.isnan(v) for v in values) else math.nan


def famval_rates(records: list[dict[str, Any]]) -> dict[str, float]:
    """``axis -> famval_good/<axis>`` averaged over ``records`` (one per seed); NaN where a seed lacks it."""
    axes = sorted({k.split("/", 1)[1] for r in records for k in r if k.startswith("famval_good/")})
    return {a: _mean([r.get(f"famval_good/{a}", math.nan) for r in records]) for a in axes}


def family_score(rates: dict[str, float], defended: float | None) -> float:
    """The rule's score: the mean over axes of the held-back families' rate, the jailbreak axis's averaged
    with the attack's defended rate when there is one (NaN when anything it needs is unmeasured)."""
    if not rates:
        return math.nan
    scores = dict(rates)
    if defended is not None and "jailbreak" in scores:
        scores["jailbreak"] = _mean([scores["jailbreak"], defended])
    return _mean(list(scores.values()))


def steps_to_attack(steps: dict[int, dict[str, Any]], top: int) -> list[int]:
    """A candidate's ``top`` eligible steps by the held-back families' rate (ties: lower teacher-KL, fewer steps)."""
    rows = [(s, m) for s, m in steps.items() if m["eligible"] and not math.isnan(family_score(m["famval_good_by_axis"], None))]
    rows.sort(key=lambda row: (-family_score(row[1]["famval_good_by_axis"], None), row[1]["val_teacher_kl"], row[0]))
    return sorted(s for s, _ in rows[:top])


def validation_behaviors() -> list[Any]:
    """The organism's validation behaviours (those of the jailbreak ``val`` split), as attack targets."""
    held = {p["meta"]["behavior"] for p in build_pairs("jailbreak", "val")}
    return [b for b in organism_behaviors("train") if b.id in held]


def validation_wrappers() -> list[Any]:
    """Every organism wrapper of a non-held-out family (training and held-back families alike)."""
    return [Wrapper(t.family, t.text, lambda req, core, t=t: wrap(t, req, core)) for t in ORGANISM.templates("train")]


def _checkpoint_target(run: RunConfig, step: int, settings: FamilyAttackSettings) -> Any:
    """The model of ``run`` at checkpoint ``step``, built as training built it, answering greedily."""
    # deferred: these load torch (a dry run and the report never need it)
    from opct.attack.target import HFTarget
    from opct.models import PromptRenderer, add_lora, disable_dropout, load_model, load_tokenizer
    from opct.runs.checkpoint import load_checkpoint_weights

    model = load_model(run.model)
    if run.train.disable_dropout:
        disable_dropout(model)
    if run.finetune == "lora":
        model = add_lora(model, run.lora)
    load_checkpoint_weights(RunLayout(run.run_dir).checkpoint(step), model)
    model.eval()
    tokenizer = load_tokenizer(run.model.name_or_path, run.model.chat_template, run.model.revision, run.model.trust_remote_code)
    gen = GenerationConfig(max_new_tokens=settings.max_new_tokens, sequences_per_call=settings.sequences_per_call)
    return HFTarget(model, tokenizer, gen, PromptRenderer.for_model(tokenizer, run.model))


def attack_checkpoint(run: RunConfig, step: int, settings: FamilyAttackSettings) -> dict[str, Any]:
    """The attack's summary for ``run`` at ``step`` (reused from its folder when it already ran there):
    behaviours cracked / defended / unscored, the defended rate over scored ones (None when none is
    scored), queries and seconds."""
    # deferred: these load torch (a dry run and the report never need it)
    from opct.attack.run import scorer_for_responses

    out = RunLayout(run.run_dir).validation_attack(step)
    summary_path = out / "summary.json"
    if summary_path.is_file():
        return json.loads(summary_path.read_text(encoding="utf-8"))
    start = time.perf_counter()
    target = _checkpoint_target(run, step, settings)
    config = SearchConfig(budget=settings.budget, seed=0)
    outcomes = SearchAttacker(validation_wrappers(), target, scorer_for_responses(make_scorer("organism")), config).run(
        validation_behaviors())
    seconds = time.perf_counter() - start
    write_attack_results(outcomes, out, {"attacker": "search", "threshold": config.threshold, "budget": config.budget,
                                         "judge": "organism-harm@1", "split": "val", "step": step})
    counts = outcome_counts(outcomes)["behaviors"]
    scored = counts["cracked"] + counts["defended"]
    summary = {**counts, "defended_rate": counts["defended"] / scored if scored else None,
               "queries": sum(len(o.attempts) for o in outcomes), "seconds": round(seconds, 2)}
    summary_path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def attack_candidates(
    runs: list[tuple[str, str, dict[str, Any], RunConfig]], candidates: list[dict[str, Any]],
    settings: FamilyAttackSettings, log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Attack each candidate's best ``settings.top`` checkpoints on every seed and fill each attacked step's
    ``family_attack`` and ``family_score`` in ``candidates`` (scored as :func:`score_steps` does); returns the cost."""
    by_id = {c["id"]: c for c in candidates}
    attacks = queries = 0
    seconds = 0.0
    for candidate in candidates:
        chosen = steps_to_attack(candidate["steps"], settings.top)
        for step in chosen:
            summaries = [attack_checkpoint(run, step, settings) for cid, _, _, run in runs if cid == candidate["id"]]
            attacks += len(summaries)
            queries += sum(s["queries"] for s in summaries)
            seconds += sum(s["seconds"] for s in summaries)
            m = by_id[candidate["id"]]["steps"][step]
            defended = _mean([math.nan if s["defended_rate"] is None else s["defended_rate"] for s in summaries])
            m["family_attack"] = {"defended_rate": defended, "defended_rate_by_seed": [s["defended_rate"] for s in summaries],
                                  **{k: sum(s[k] for s in summaries) for k in ("cracked", "defended", "unscored")}}
            m["family_score"] = family_score(m["famval_good_by_axis"], defended)
        if chosen:
            log(f"[select] {candidate['id']}: validation attack on steps {', '.join(map(str, chosen))}")
    return {"budget": settings.budget, "top": settings.top, "behaviors": len(validation_behaviors()),
            "wrapper_families": sorted({w.family for w in validation_wrappers()}), "attacks": attacks,
            "queries": queries, "seconds": round(seconds, 1),
            "seconds_per_attack": round(seconds / attacks, 2) if attacks else None}


def score_steps(candidates: list[dict[str, Any]], attacked: bool) -> None:
    """Without the attack, every step's ``family_score`` is the held-back families' rate alone; with it,
    steps not attacked get none (the rule picks among attacked steps)."""
    for c in candidates:
        for m in c["steps"].values():
            if "family_score" not in m:
                m["family_score"] = math.nan if attacked else family_score(m["famval_good_by_axis"], None)
