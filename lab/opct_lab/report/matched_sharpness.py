"""The matched-sharpness study's pre-registered analysis (docs/matched_sharpness.md, "Primary estimate",
"Secondary measures", "Reading rules, fixed now"), over its study folders; written before any result was read.

* **Per level** ``D_ℓ(m, τ)``: :func:`opct.report.pooled.pooled_rows` of the level's families, ``opct − bct-t10``
  (τ = 1.0) or ``opct-t05 − bct-t05`` (τ = 0.5), 2,000 resamples, the generator seeded ``47 + level index``.
* **Interaction** ``I = D_L3 − D_L1``: the b-th resample is ``D_L3.draws[b] − D_L1.draws[b]`` (levels resampled
  independently); resamples where a level has no value are left out and counted; 95% and 97.5% percentile
  intervals of the same resamples, each widened to contain the point.
* **Reading** (:func:`read`): the four rules at τ, each condition reported with its interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from opct.errors import OpctError
from opct.report.experiment import Experiment
from opct.report.pooled import PooledRow, plan_seeds, pooled_record, pooled_rows, seed_runs, split_run_key
from opct.report.rollout_health import WINDOW, rollout_collapse
from opct.report.table import build_columns
from opct.stats.estimate import DEFAULT_SEED, percentile_ci
from opct.stats.paired import PooledDifference, pooled_paired_difference
from opct_lab.layout import STUDY_FILE
from opct_lab.report.razor import run_points
from opct_lab.report.study import load_study_dir

#: The two primary metrics (held-out adaptive defense, held-out awareness AUSC); the paper's side is higher.
PRIMARY = ("dsr_adaptive", "awareness")
RESAMPLES = 2000
#: The pre-registered generator seed of level index 0 (the report's seed).
SEED = DEFAULT_SEED
#: The 95% interval and the Bonferroni interval over the two primary metrics (97.5%).
ALPHA, BONFERRONI_ALPHA = 0.05, 0.025
#: ``τ: (OPCT arm, BCT-sampled arm)``.
ARMS = {1.0: ("opct", "bct-t10"), 0.5: ("opct-t05", "bct-t05")}
REFERENCE = "bct"

ON_POLICY_HELPS = "on-policy helps where responses are diverse"
SHARPNESS = "sharpness explains it"
ON_POLICY_HURTS = "on-policy hurts where responses are diverse"
NOT_RESOLVED = "not resolved"


def interval(est_value: float, draws: np.ndarray, alpha: float) -> tuple[float, float]:
    """The percentile interval of ``draws`` at ``alpha``, widened to contain ``est_value``."""
    lo, hi = percentile_ci(draws, alpha)
    if math.isnan(lo) or math.isnan(est_value):
        return math.nan, math.nan
    return min(lo, est_value), max(hi, est_value)


def interaction(l1: PooledDifference, l3: PooledDifference) -> dict[str, Any]:
    """``I = D_L3 − D_L1`` with its 95% and 97.5% intervals and the number of resamples used."""
    value = l3.estimate.value - l1.estimate.value
    total = min(len(l1.draws), len(l3.draws))
    draws = (l3.draws[:total] - l1.draws[:total]) if total else np.empty(0)
    kept = draws[np.isfinite(draws)]
    return {"value": _num(value), "ci95": [_num(v) for v in interval(value, kept, ALPHA)],
            "ci975": [_num(v) for v in interval(value, kept, BONFERRONI_ALPHA)],
            "resamples_used": int(kept.size), "resamples": total}


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _num(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def level_rows(levels: Mapping[str, Sequence[str]], families: Mapping[str, Experiment], a: str, b: str,
               n_resamples: int = RESAMPLES) -> dict[str, dict[str, PooledRow]]:
    """``{level: {column key: a − b}}`` pooled over the level's families, seeded ``47 + level index``."""
    out = {}
    for index, (level, names) in enumerate(levels.items()):
        found = {f: families[f] for f in names if f in families}
        rows = pooled_rows(found, a, b, n_resamples=n_resamples, seed=SEED + index) if found else []
        out[level] = {row.column.key: row for row in rows}
    return out


def cross_rows(levels: Mapping[str, Sequence[str]], main: Mapping[str, Experiment], other: Mapping[str, Experiment],
               a: str, b: str, n_resamples: int = RESAMPLES) -> dict[str, dict[str, dict[str, Any]]]:
    """``a`` (from ``main``'s folders) − ``b`` (from ``other``'s), paired unit by unit and seed by seed per family,
    with :func:`pooled_paired_difference`: ``{level: {column key: record}}`` for the families both folders have."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for index, (level, names) in enumerate(levels.items()):
        pairs = {f: (main[f], other[f]) for f in names if f in main and f in other}
        columns: dict[str, dict[tuple[str, int], Any]] = {}
        statistics: dict[str, Any] = {}
        for family, (exp_a, exp_b) in pairs.items():
            runs_a, runs_b = seed_runs(exp_a, a), seed_runs(exp_b, b)
            own_b = {c.key: c for c in build_columns(exp_b) if c.paired is not None}
            for column in build_columns(exp_a):
                if column.paired is None or column.key not in own_b:
                    continue
                for s in sorted(set(runs_a) & set(runs_b)):
                    values_a, stat = column.paired(exp_a, runs_a[s])
                    values_b, _ = own_b[column.key].paired(exp_b, runs_b[s])
                    statistics.setdefault(column.key, stat)
                    if values_a and values_b:
                        columns.setdefault(column.key, {})[(family, s)] = (values_a, values_b)
        level_out = {}
        for key, cells in columns.items():
            diff = pooled_paired_difference(cells, statistics[key], n_resamples=n_resamples, seed=SEED + index)
            est = diff.estimate
            level_out[key] = {"value": _num(est.value), "ci_low": _num(est.ci_low), "ci_high": _num(est.ci_high),
                              "rows": est.n, "units": est.clusters, "cells": diff.cells}
        out[level] = level_out
    return out


def _first_last(records: Sequence[Mapping[str, Any]], key: str) -> list[float | None]:
    """The mean of ``key`` over the first and the last :data:`WINDOW` records that have it (half when fewer)."""
    values = [float(r[key]) for r in records if isinstance(r.get(key), int | float) and math.isfinite(float(r[key]))]
    if not values:
        return [None, None]
    window = max(1, min(WINDOW, len(values) // 2))
    return [sum(values[:window]) / window, sum(values[-window:]) / window]


def run_health(families: Mapping[str, Experiment], opct_arms: Sequence[str], bct_arms: Sequence[str]) -> dict[str, Any]:
    """Each OPCT run's collapse warning with its entropy and teacher-KL first → last; each BCT-sampled run's
    targets' entropy and share cut at the limit (means over its steps)."""
    opct, bct = [], []
    for family, exp in families.items():
        seeds = plan_seeds(exp)
        for key in exp.methods:
            method = split_run_key(key, seeds)[0]
            records = exp.train.get(key, [])
            if method in opct_arms:
                warning = rollout_collapse(records)
                opct.append({"family": family, "run": key, "method": method, "collapsed": warning is not None,
                             "warning": warning.sentence() if warning else None,
                             "entropy": _first_last(records, "entropy"),
                             "teacher_kl": _first_last(records, "kl_to_teacher"), "steps": len(records)})
            elif method in bct_arms:
                entropy = [float(r["entropy"]) for r in records if isinstance(r.get("entropy"), int | float)]
                cut = [float(r["truncation_rate"]) for r in records if isinstance(r.get("truncation_rate"), int | float)]
                bct.append({"family": family, "run": key, "method": method,
                            "target_entropy": sum(entropy) / len(entropy) if entropy else None,
                            "cut_share": sum(cut) / len(cut) if cut else None})
    return {"opct": opct, "bct_sampled": bct}


def kl_to_base(levels: Mapping[str, Sequence[str]], families: Mapping[str, Experiment]) -> dict[str, Any]:
    """Mean KL(fine-tuned ‖ base) per arm and level, over the runs with a complete KL, and the runs cut off."""
    out: dict[str, Any] = {}
    for level, names in levels.items():
        points = run_points({f: families[f] for f in names if f in families})
        per_arm: dict[str, Any] = {}
        for p in points:
            arm = per_arm.setdefault(p["method"], {"kl": [], "runs": 0, "incomplete": []})
            arm["runs"] += 1
            if p["incomplete"]:
                arm["incomplete"].append(f"{p['family']}/{p['run']}")
            else:
                arm["kl"].append(p["kl"])
        out[level] = {m: {"mean_kl": sum(v["kl"]) / len(v["kl"]) if v["kl"] else None, "runs": v["runs"],
                          "incomplete": v["incomplete"]} for m, v in per_arm.items()}
    return out


def _without(by_run: Mapping[str, Any], gone: set[str]) -> dict[str, Any]:
    return {k: v for k, v in by_run.items() if k not in gone}


def without_runs(families: Mapping[str, Experiment], drop: Sequence[str]) -> dict[str, Experiment]:
    """The experiments with the runs ``family/run`` in ``drop`` left out (for the sensitivity check)."""
    out = {}
    for family, exp in families.items():
        gone = {d.split("/", 1)[1] for d in drop if d.split("/", 1)[0] == family}
        if not gone:
            out[family] = exp
            continue
        out[family] = replace(exp, plan={**exp.plan, "methods": [m for m in exp.plan.get("methods", []) if m not in gone]},
                              results=_without(exp.results, gone), train=_without(exp.train, gone),
                              attack=_without(exp.attack, gone))
    return out


def _ci(row: PooledRow | Mapping[str, Any] | None) -> tuple[float, float]:
    """A D's 95% interval, from its pooled row or its record in ``analysis.json``."""
    if row is None:
        return math.nan, math.nan
    if isinstance(row, Mapping):
        return _nan(row.get("ci_low")), _nan(row.get("ci_high"))
    return row.difference.estimate.ci_low, row.difference.estimate.ci_high


def _incomplete(row: PooledRow | Mapping[str, Any] | None) -> bool:
    """Whether a D is missing or INCOMPLETE (from its pooled row or its record)."""
    if row is None:
        return True
    return bool(row.get("incomplete") if isinstance(row, Mapping) else row.incomplete)


def fmt_interval(ci: Sequence[float | None]) -> str:
    """``[+0.0123, -0.0456]``; ``—`` for an end not measured."""
    return "[" + ", ".join("—" if v is None or math.isnan(v) else f"{v:+.4f}" for v in ci) + "]"


def above(ci: Sequence[float | None]) -> bool:
    """The interval lies wholly above 0 (an end at 0 does not)."""
    return ci[0] is not None and not math.isnan(ci[0]) and ci[0] > 0.0


def below(ci: Sequence[float | None]) -> bool:
    """The interval lies wholly below 0 (an end at 0 does not)."""
    return ci[1] is not None and not math.isnan(ci[1]) and ci[1] < 0.0


def contains(ci: Sequence[float | None]) -> bool:
    """The interval contains 0 (a measured interval that is neither wholly above nor below)."""
    return None not in ci and not any(math.isnan(v) for v in ci) and not above(ci) and not below(ci)


#: The two versions of the reading rules (docs/matched_sharpness.md, "Reading rules, fixed now" and its amendment
#: of 2026-12-07): ``"as run"``, the code that made the published reading, which applied the text's clause
#: "a resolved interaction with D_L3 not resolved" reads not resolved only in the paper's direction; ``"as
#: written"``, that clause in both directions, as the text states it (issue 71).
READING_RULES = ("as run", "as written")


def read(d: Mapping[str, Mapping[str, PooledRow | Mapping[str, Any]]], inter: Mapping[str, Mapping[str, Any]],
         softening: tuple[float, float], collapsed: Sequence[str], rule: str = "as written") -> dict[str, Any]:
    """The reading at one τ: ``d`` ``{level: {metric: D}}`` (levels in order L1, L3; a pooled row or its
    record), ``inter`` ``{metric: I}``, ``softening`` the 95% interval of ``bct − bct-sampled`` on adaptive
    defense at L3, ``collapsed`` the OPCT runs with a warning; ``rule`` one of :data:`READING_RULES`: under
    ``"as written"`` an interaction resolved below 0 with D_L3 not resolved is not resolved, as it is above 0."""
    if rule not in READING_RULES:
        raise ValueError(f"rule must be one of {READING_RULES}, got {rule!r}")
    l1, l3 = list(d)[:2] if len(d) >= 2 else (None, None)
    conditions: list[str] = []
    incomplete = [f"{m} at {lv}" for lv in (l1, l3) if lv for m in PRIMARY if _incomplete(d[lv].get(m))]
    for m in PRIMARY:
        i95, i975 = inter.get(m, {}).get("ci95", [None, None]), inter.get(m, {}).get("ci975", [None, None])
        conditions.append(f"{m}: D_L1 95% {fmt_interval(_ci(d[l1].get(m)) if l1 else [None, None])}, "
                          f"D_L3 95% {fmt_interval(_ci(d[l3].get(m)) if l3 else [None, None])}, I 95% {fmt_interval(i95)}, "
                          f"I 97.5% {fmt_interval(i975)} ({inter.get(m, {}).get('resamples_used', 0)} resamples used)")
    soft_ci = softening
    conditions.append(f"bct − bct-sampled on dsr_adaptive at L3, 95% {fmt_interval(soft_ci)}")
    conditions.append("collapse warnings on OPCT runs: " + (", ".join(collapsed) if collapsed else "none"))

    def i_ci(m: str, key: str) -> list[float | None]:
        return inter.get(m, {}).get(key, [None, None])

    helps_metric = [m for m in PRIMARY if l3 and above(i_ci(m, "ci975")) and above(_ci(d[l3].get(m)))]
    any_i95_below = [m for m in PRIMARY if below(i_ci(m, "ci95"))]
    hurts = [m for m in PRIMARY if below(i_ci(m, "ci975"))
             and (rule == "as run" or (l3 is not None and not contains(_ci(d[l3].get(m)))))]
    null_everywhere = all(l1 and l3 and contains(_ci(d[l1].get(m))) and contains(_ci(d[l3].get(m)))
                          and contains(i_ci(m, "ci975")) for m in PRIMARY)
    reasons: list[str] = []
    if incomplete:
        reasons.append("INCOMPLETE: " + ", ".join(incomplete))
    if collapsed:
        reasons.append("collapse warning on " + ", ".join(collapsed))
    if incomplete or collapsed:
        outcome = NOT_RESOLVED
    elif helps_metric and not any_i95_below:
        outcome = ON_POLICY_HELPS
        reasons.append(f"I's 97.5% interval and D_L3's 95% interval lie above 0 on {', '.join(helps_metric)}; "
                       "no I 95% interval lies below 0; no OPCT run collapsed")
    elif above(soft_ci) and null_everywhere:
        outcome = SHARPNESS
        reasons.append("softening costs BCT at L3 on adaptive defense; every D and I contains 0 on both metrics; no "
                       "OPCT run collapsed (consistent with sharpness: a matched difference below the page's scale "
                       "would not be seen)")
    elif hurts:
        outcome = ON_POLICY_HURTS
        reasons.append(f"I's 97.5% interval lies below 0 on {', '.join(hurts)}")
    else:
        outcome = NOT_RESOLVED
        grows = [m for m in PRIMARY if l3 and above(i_ci(m, "ci975")) and not above(_ci(d[l3].get(m)))]
        if grows:
            reasons.append(f"the on-policy effect grows with diversity on {', '.join(grows)} but no advantage is "
                           "shown (D_L3 not resolved)")
        falls = [m for m in PRIMARY if l3 and below(i_ci(m, "ci975")) and contains(_ci(d[l3].get(m)))]
        if falls and rule == "as written":
            reasons.append(f"the on-policy effect falls with diversity on {', '.join(falls)} but no deficit is "
                           "shown (D_L3 not resolved: a resolved interaction with D_L3 not resolved reads not resolved)")
        reasons.append("no reading's conditions all hold")
    return {"outcome": outcome, "reasons": reasons, "conditions": conditions, "incomplete": incomplete,
            "collapsed": list(collapsed), "rule": rule}


def reread(part: Mapping[str, Any], rule: str = "as written") -> dict[str, Any]:
    """:func:`read` of one τ's part of a written ``analysis.json`` (its D records, interactions, softening
    interval and collapse list), under ``rule``: how a published reading is read again under an amendment."""
    sampled = part["arms"][1]
    d = {lv: dict(level["D"]) for lv, level in part["levels"].items()}
    soft = part.get(f"{REFERENCE} − {sampled}") or {}
    last = list(soft)[-1] if soft else None
    softening = _ci(soft[last].get("dsr_adaptive")) if last else (math.nan, math.nan)
    return read(d, part["interaction"], softening, part["reading"].get("collapsed") or [], rule=rule)


def analyse_tau(levels: Mapping[str, Sequence[str]], families: Mapping[str, Experiment], tau: float,
                reference: Mapping[str, Experiment] | None = None, n_resamples: int = RESAMPLES) -> dict[str, Any]:
    """One τ's estimates, secondary measures and reading. ``reference``: the folders holding ``bct`` when it is
    not in ``families`` (τ = 0.5: the main study's), paired across folders."""
    opct, sampled = ARMS[tau]
    health = run_health(families, (opct,), (sampled,))
    collapsed = [f"{r['family']}/{r['run']}" for r in health["opct"] if r["collapsed"]]

    def estimates(fams: Mapping[str, Experiment]) -> tuple[dict, dict]:
        d = level_rows(levels, fams, opct, sampled, n_resamples)
        names = list(d)
        inter = {m: interaction(d[names[0]][m].difference, d[names[1]][m].difference) for m in PRIMARY
                 if len(names) >= 2 and m in d[names[0]] and m in d[names[1]]}
        return d, inter

    d, inter = estimates(families)
    if reference is None:
        soft = level_rows(levels, families, REFERENCE, sampled, n_resamples)
        versus_opct = level_rows(levels, families, REFERENCE, opct, n_resamples)
        soft_records = {lv: {k: pooled_record(r) for k, r in rows.items()} for lv, rows in soft.items()}
        opct_records = {lv: {k: pooled_record(r) for k, r in rows.items()} for lv, rows in versus_opct.items()}
        last = list(soft)[-1] if soft else None
        softening = _ci(soft[last].get("dsr_adaptive") if last else None)
    else:
        soft_records = cross_rows(levels, reference, families, REFERENCE, sampled, n_resamples)
        opct_records = cross_rows(levels, reference, families, REFERENCE, opct, n_resamples)
        last = list(soft_records)[-1] if soft_records else None
        rec = soft_records.get(last, {}).get("dsr_adaptive") if last else None
        softening = (math.nan, math.nan) if rec is None else (_nan(rec["ci_low"]), _nan(rec["ci_high"]))
    reading = read(d, inter, softening, collapsed, rule="as run")
    reading_as_written = read(d, inter, softening, collapsed, rule="as written")
    out = {"tau": tau, "arms": [opct, sampled], "levels": {lv: {"seed": SEED + i, "families": list(levels[lv]),
                                                               "D": {k: pooled_record(r) for k, r in d[lv].items()}}
                                                          for i, lv in enumerate(d)},
           "interaction": inter, f"{REFERENCE} − {sampled}": soft_records, f"{REFERENCE} − {opct}": opct_records,
           "kl_to_base": kl_to_base(levels, families), "health": health, "reading": reading,
           "reading_as_written": reading_as_written}
    if collapsed:  # the sensitivity check: the same estimates without the collapsed runs, never the reading
        d_s, inter_s = estimates(without_runs(families, collapsed))
        out["sensitivity_without_collapsed"] = {
            "label": "sensitivity check, not the reading", "left_out": collapsed,
            "D": {lv: {m: pooled_record(r) for m, r in rows.items() if m in PRIMARY} for lv, rows in d_s.items()},
            "interaction": inter_s}
    return out


def analyse_t05(t05_dir: str | Path, reference_dir: str | Path, n_resamples: int = RESAMPLES) -> dict[str, Any]:
    """τ = 0.5 from ``t05_dir``, its ``bct`` reference paired from ``reference_dir``'s folders: the τ = 1.0 study's
    folder, or a folder of that file's ``bct`` runs alone (trained again with the same seeds and recipes)."""
    study_t05, families_t05 = load_study_dir(t05_dir)
    reference_study, reference = load_study_dir(reference_dir)
    levels = study_t05.get("levels") or reference_study.get("levels") or {}
    return {"t05_study": str(t05_dir), "reference": str(reference_dir),
            "tau_0.5": analyse_tau(levels, families_t05, 0.5, reference=reference, n_resamples=n_resamples)}


def with_t05(data: Mapping[str, Any], t05: Mapping[str, Any]) -> dict[str, Any]:
    """An analysis with its τ = 0.5 part (:func:`analyse_t05`) set, and whether the two readings differ."""
    out = {k: v for k, v in data.items() if k not in ("t05_study", "reference", "tau_0.5", "readings_differ")}
    out.update(t05)
    out["readings_differ"] = out["tau_1.0"]["reading"]["outcome"] != out["tau_0.5"]["reading"]["outcome"]
    return out


def analyse(study_dir: str | Path, t05_dir: str | Path | None = None, n_resamples: int = RESAMPLES) -> dict[str, Any]:
    """The whole pre-registered analysis: τ = 1.0 from ``study_dir``, and τ = 0.5 from ``t05_dir`` when given
    (its ``bct`` reference paired from ``study_dir``'s folders)."""
    study, families = load_study_dir(study_dir)
    levels = study.get("levels") or {}
    if len(levels) != 2:
        raise OpctError(f"{Path(study_dir) / STUDY_FILE}: the analysis needs exactly two levels (L1, L3) under "
                        f"'levels', found {list(levels)}; is this the matched-sharpness study's folder?")
    out = {"study": str(study_dir), "resamples": n_resamples, "seeds": f"{SEED} + level index",
           "tau_1.0": analyse_tau(levels, families, 1.0, n_resamples=n_resamples)}
    return out if t05_dir is None else with_t05(out, analyse_t05(t05_dir, study_dir, n_resamples))
