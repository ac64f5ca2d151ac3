"""The ablation table: every variant of an experiment minus its reference, pooled over the seeds.

An experiment with a ``reference`` (:mod:`opct.experiments.settings`: named variants of a method, one
setting changed each) is an ablation. For every variant and every results column that has a paired
reader, the difference variant − reference is measured seed by seed on the units both were evaluated
on and pooled over the seeds (:func:`opct.report.pooled.pooled_rows`, the study's estimator with one
family). The compute each variant spent is read from its runs (:func:`opct.runs.compute.run_compute`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from opct.methods import declared_compute
from opct.report.experiment import Experiment
from opct.report.pooled import PooledRow, difference_parts, plan_seeds, pooled_rows, seed_runs, split_run_key
from opct.runs.compute import run_compute

HOWTO = (
    "Each row changes one setting of the reference recipe. A cell is the variant minus the reference on that "
    "metric (points for rates), measured seed by seed on the units both were evaluated on and averaged over "
    "the seeds, with a 95% bootstrap interval that resamples the units and the seeds; ▲/▼ mark an interval that "
    "excludes 0 on the better/worse side (↑/↓ in the header say which side is better). Unscored rows are left "
    "out of every cell, never counted as success. Compute is the mean over the variant's seeds of what its "
    "training spent: tokens sampled, scored by the frozen teacher and backpropagated, and optimizer seconds."
)
COMPUTE_KEYS = ("tokens_generated", "tokens_teacher_scored", "tokens_backpropagated", "train_seconds")


@dataclass
class AblationRow:
    """One variant against the reference: its changed settings, its differences and its compute."""

    variant: str
    changed: str
    differences: list[PooledRow]
    compute: dict[str, float] = field(default_factory=dict)
    seeds: int = 0


def is_ablation(exp: Experiment) -> bool:
    """Whether the experiment's plan names a reference to compare its variants with."""
    return bool(exp.plan.get("reference"))


def variant_names(exp: Experiment) -> list[str]:
    """The trained methods and variants of the plan, in its order (seed suffixes removed, base left out)."""
    seeds = plan_seeds(exp)
    names: dict[str, None] = {}
    for key in exp.methods:
        name, _ = split_run_key(key, seeds)
        if name != "base":
            names.setdefault(name)
    return list(names)


def _changed(exp: Experiment, name: str) -> str:
    variant = (exp.plan.get("variants") or {}).get(name)
    if not variant:
        return "reference" if name == exp.plan.get("reference") else "—"
    return ", ".join(f"{k}={v}" for k, v in variant.get("settings", {}).items()) or "(nothing changed)"


def variant_compute(exp: Experiment, name: str) -> tuple[dict[str, float], int]:
    """The compute a method or variant spent (each of ``COMPUTE_KEYS``), the mean over its seeds' runs, and
    how many runs it was read from; a run whose compute cannot be read is skipped with a warning on ``exp``,
    and ``({}, 0)`` when none can."""
    per_seed = []
    for key in seed_runs(exp, name).values():
        run_dir = exp.layout.run(key)
        try:
            per_seed.append(run_compute(run_dir, declared=declared_compute))
        except (OSError, ValueError, KeyError) as err:
            exp.warnings.append(f"compute of {key} unreadable ({type(err).__name__}: {err})")
    if not per_seed:
        return {}, 0
    return {k: statistics.fmean(c[k] for c in per_seed) for k in COMPUTE_KEYS}, len(per_seed)


def ablation_rows(exp: Experiment, n_resamples: int = 2000) -> list[AblationRow]:
    """One row per variant other than the reference (empty when the experiment is not an ablation), then
    the reference's own compute as the last row (its differences empty)."""
    reference = exp.plan.get("reference")
    if not reference:
        return []
    families = {exp.name: exp}
    rows = []
    for name in variant_names(exp):
        diffs = [] if name == reference else pooled_rows(families, name, reference, n_resamples=n_resamples)
        compute, seeds = variant_compute(exp, name)
        rows.append(AblationRow(name, _changed(exp, name), diffs, compute, seeds))
    rows.sort(key=lambda r: r.variant == reference)
    return rows


def _mark(row: PooledRow) -> str:
    est = row.difference.estimate
    if math.isnan(est.ci_low) or (est.ci_low <= 0.0 <= est.ci_high):
        return ""
    better = (est.ci_low > 0.0) == (row.column.better == "higher")
    return " ▲" if better else " ▼"


def ablation_table(rows: Sequence[AblationRow]) -> tuple[list[str], list[list[str]]]:
    """Headers and cells: variant, what it changes, one ``Δ [interval]`` per column, then compute."""
    columns: dict[str, str] = {}
    for row in rows:
        for d in row.differences:
            columns.setdefault(d.column.key, d.column.header)
    headers = ["variant", "changes", *(f"Δ {h}" for h in columns.values()),
               "tokens sampled", "teacher-scored", "backprop", "train s", "seeds"]
    out = []
    for row in rows:
        by_key = {d.column.key: d for d in row.differences}
        cells = []
        for key in columns:
            d = by_key.get(key)
            cells.append(" ".join(difference_parts(d)).strip() + _mark(d) if d else "—")
        c = row.compute
        compute = [f"{c[k]:,.0f}" if k in c else "—" for k in COMPUTE_KEYS]
        out.append([row.variant, row.changed, *cells, *compute, str(row.seeds)])
    return headers, out


def largest_moves(rows: Sequence[AblationRow]) -> list[str]:
    """Per column, the variant whose difference from the reference is largest among those whose interval
    excludes 0: ``"Adaptive defense ↑: opct-lr1e-3 −12.0 pts [−18.1, −5.9]"``."""
    best: dict[str, tuple[float, str, str]] = {}
    for row in rows:
        for d in row.differences:
            if not _mark(d):
                continue
            size = abs(d.difference.estimate.value)
            if d.column.key not in best or size > best[d.column.key][0]:
                best[d.column.key] = (size, d.column.header, f"{row.variant} {' '.join(difference_parts(d))}")
    return [f"{header}: {text}" for _, header, text in best.values()]
