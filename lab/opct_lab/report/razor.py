"""RL's Razor's test on a study: does each run's KL from its base go with its forgetting and its held-out safety?

Each trained run's ``train/<key>/kl_to_base.json`` (:mod:`opct_lab.study.run_kl`) gives its KL per answer;
across every run of the study, its Pearson correlation with each capability column's regression (the run's
value minus its family's base value) and with each held-out safety metric (the run's value), with a 95%
percentile bootstrap interval that resamples runs (2,000 resamples, the report's seed). *RL's Razor*
(arXiv 2509.04259) predicts a negative correlation with the capability change (more KL, more forgetting).

A run's KL is over its complete answers: an answer cut off at the token limit has no sequence KL. When more
than :data:`~opct.evals.outcomes.DEFAULT_MAX_UNSCORED` of a run's answers were cut off, its KL is INCOMPLETE
(the eval rule: not a measurement): the table shows it marked, with its answers and cut-off counts, and the
correlations leave it out and say how many they left out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from opct.evals.outcomes import DEFAULT_MAX_UNSCORED, status
from opct.report.experiment import Experiment
from opct.report.pooled import plan_seeds, split_run_key
from opct.report.table import build_columns, render_markdown
from opct.stats.estimate import DEFAULT_SEED, percentile_ci
from opct_lab.report.trend import SAFETY_METRICS

#: A run point's own fields (the rest are the metrics its KL is correlated with).
_RUN_FIELDS = ("family", "run", "method", "kl", "answers", "truncated", "incomplete")

#: The file in a run's folder (beside ``final/``) that holds its KL to the base (:mod:`opct_lab.study.run_kl`).
KL_FILE = "kl_to_base.json"


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """The Pearson correlation of ``x`` and ``y`` (``nan`` when either has no spread)."""
    sx, sy = float(np.std(x)), float(np.std(y))
    if sx == 0.0 or sy == 0.0:
        return math.nan
    return float(np.mean((x - x.mean()) * (y - y.mean())) / (sx * sy))


def correlation(x: list[float], y: list[float], *, n_resamples: int = 2000, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """``{"r", "ci_low", "ci_high", "runs"}``: Pearson's r over paired values, its interval resampling the pairs."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xs) < 3:
        return {"r": None, "ci_low": None, "ci_high": None, "runs": len(xs)}
    r = pearson(xs, ys)
    idx = np.random.default_rng(seed).integers(0, len(xs), size=(n_resamples, len(xs)))
    draws = np.array([pearson(xs[row], ys[row]) for row in idx])
    lo, hi = percentile_ci(draws, 0.05)
    num = (lambda v: None if not math.isfinite(v) else v)  # noqa: E731
    return {"r": num(r), "ci_low": num(lo), "ci_high": num(hi), "runs": len(xs)}


def run_points(families: Mapping[str, Experiment]) -> list[dict[str, Any]]:
    """Per trained run with a KL record: its family, key, KL per answer, capability regressions and safety values."""
    out = []
    for family, exp in families.items():
        columns = build_columns(exp)
        seeds = plan_seeds(exp)
        for key in exp.methods:
            path = exp.layout.run(key) / KL_FILE
            if key == "base" or not path.is_file():
                continue
            record = json.loads(path.read_text(encoding="utf-8"))
            answers, cut = int(record.get("answers", 0)), int(record.get("truncated", 0))
            point: dict[str, Any] = {"family": family, "run": key, "method": split_run_key(key, seeds)[0],
                                     "kl": record["kl_per_sequence"]["value"], "answers": answers, "truncated": cut,
                                     "incomplete": status(cut, answers, DEFAULT_MAX_UNSCORED) == "incomplete"}
            for c in columns:
                run, base = c.get(exp, key), c.get(exp, "base")
                if c.key.startswith("cap:") and run is not None and base is not None:
                    point[f"regression {c.key}"] = run.value - base.value
                elif c.key in SAFETY_METRICS and run is not None:
                    point[c.key] = run.value
            out.append(point)
    return out


def razor_data(families: Mapping[str, Experiment], n_resamples: int = 2000) -> dict[str, Any] | None:
    """Every run's KL and the correlations across the runs whose KL is complete; None when no run has a KL record."""
    points = run_points(families)
    if not points:
        return None
    keys = list(dict.fromkeys(k for p in points for k in p if k not in _RUN_FIELDS))
    rows = []
    for key in keys:
        have = [p for p in points if p.get(key) is not None and p["kl"] is not None and math.isfinite(p["kl"])]
        complete = [p for p in have if not p["incomplete"]]
        rows.append({"metric": key, **correlation([p["kl"] for p in complete], [p[key] for p in complete],
                                                   n_resamples=n_resamples),
                     "left_out": [f"{p['family']}/{p['run']}" for p in have if p["incomplete"]]})
    return {"runs": points, "correlations": rows}


def razor_markdown(data: Mapping[str, Any]) -> str:
    """The RL's Razor section of a study's report.md."""
    fmt = (lambda v: "—" if v is None else f"{v:+.2f}")  # noqa: E731
    out = ["## KL(fine-tuned ‖ base) and forgetting (RL's Razor's test)", "",
           "Each run's KL from its base on its training prompts, on its own samples (nats per answer; "
           "`train/<run>/kl_to_base.json`), against its capability change from the base (regression: run − base) "
           "and its held-out safety metrics, across every run of the study: Pearson's r with a 95% bootstrap "
           "interval over runs. RL's Razor predicts r < 0 against the capability change. A run's KL is over its "
           f"complete answers; when more than {DEFAULT_MAX_UNSCORED:.0%} of its answers were cut off at the token "
           "limit it is INCOMPLETE (not a measurement) and left out of the correlations.", ""]
    out += [render_markdown(["against", "r", "95% interval", "runs", "left out (KL INCOMPLETE)"],
                            [[r["metric"], fmt(r["r"]), f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]", str(r["runs"]),
                              str(len(r.get("left_out", [])))] for r in data["correlations"]]), ""]
    out += [render_markdown(["family", "run", "KL per answer (nats)", "answers", "cut off"],
                            [[p["family"], p["run"],
                              ("—" if p["kl"] is None else f"{p['kl']:.3f}") + (" INCOMPLETE" if p["incomplete"] else ""),
                              str(p["answers"]), str(p["truncated"])] for p in data["runs"]]), ""]
    return "\n".join(out)
