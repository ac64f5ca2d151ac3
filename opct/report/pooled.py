"""OPCT − BCT pooled over a study's families and seeds, per metric, with a verdict against the paper.

A study (the lab's, `opct-lab run`) runs one experiment per model family, each with several training seeds.
For every results column that has a paired reader (:mod:`opct.report.paired`), the units of one
(family, seed) cell are that family's eval units (questions, behaviours, facts, items) read for the
OPCT run and the BCT run of that seed; :func:`opct.stats.paired.pooled_paired_difference` pools the
cells and bootstraps seeds within family and units (what it resamples is stated there). The paper's
side of each metric is declared by its axis (:func:`paper_direction`), and :func:`verdict` reads an interval against it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opct.evals.axis_registry import axes_with
from opct.evals.axis_views import ReportView
from opct.evals.contract import Column
from opct.methods import METHODS
from opct.report.experiment import Experiment
from opct.report.metric import json_number
from opct.report.table import build_columns, method_label
from opct.stats.estimate import DEFAULT_SEED, Estimate
from opct.stats.paired import PooledDifference, pooled_paired_difference

HOLDS = "paper's direction holds"
REVERSED = "reversed"
NOT_RESOLVED = "not resolved"
NOT_MEASURED = "not measured"
NO_CLAIM = "no claim in the paper"
#: The paper's side of a non-inferiority claim (capability): OPCT − BCT is above ``−NONINFERIORITY_MARGIN``.
NO_WORSE = "no worse"
#: The margin of a "no worse" claim, on the rate scale: 2 points (docs/metrics.md, "Capability: no worse within a margin").
NONINFERIORITY_MARGIN = 0.02
#: The verdicts of a "no worse" claim: shown, a deficit shown, or not shown (:func:`noninferiority_verdict`).
NONINFERIOR = "holds"
WORSE = "worse"
#: A deficit shown that the margin forgives: the interval lies wholly below 0, its lower end above ``−margin``.
WORSE_WITHIN_MARGIN = "worse, within the margin"
NOT_SHOWN = "not shown"
#: The two versions of the "no worse" reading (docs/metrics.md, "Capability: no worse within a margin"):
#: ``"original"`` as pre-registered, ``"amended"`` by issue 71 (2026-12-07) so that an interval wholly below 0
#: reads worse. Reports read with the amended rule and show the original beside it.
NONINFERIORITY_RULES = ("original", "amended")
#: The date of the amendment, as the reports name it.
AMENDED = "2026-12-07"
#: ``(treatment, baseline)``: the pair the paper's claims are about, from the methods' cards; any other pair
#: is read without a side (:func:`neutral_verdict`).
PAPER_PAIR = METHODS.paper_pair()


def paper_directions() -> dict[str, tuple[str, str]]:
    """The paper's claim for OPCT − BCT per results column key, from every registered axis
    that gives a :class:`~opct.evals.axis_views.ReportView` (its ``paper_directions``; a key ending in ``:`` covers
    the columns it prefixes)."""
    return {key: claim for _, report in axes_with(ReportView) for key, claim in report.paper_directions.items()}


def paper_direction(column_key: str) -> tuple[str, str] | None:
    """``(side, claim)`` of the paper for a results column, or None when the paper makes no claim."""
    directions = paper_directions()
    if column_key in directions:
        return directions[column_key]
    prefixed = [k for k in directions if k.endswith(":") and column_key.startswith(k)]
    return directions[prefixed[0]] if prefixed else None


def noninferiority_verdict(ci_low: float, ci_high: float, margin: float = NONINFERIORITY_MARGIN,
                           rule: str = "amended") -> str:
    """Read the 95% interval of OPCT − BCT against the claim "OPCT no worse than BCT within ``margin``".

    A one-sided test at α = 0.025 (the interval's lower end is the one-sided 97.5% lower bound).
    ``rule="amended"`` (issue 71, 2026-12-07): :data:`WORSE` when the upper end is below 0 and the lower
    end at or below ``−margin``, :data:`WORSE_WITHIN_MARGIN` when the upper end is below 0 and the lower
    end above ``−margin`` (a deficit is shown, however small), :data:`NONINFERIOR` when the lower end is
    above ``−margin`` and the upper end at or above 0, :data:`NOT_SHOWN` otherwise.
    ``rule="original"`` (as pre-registered): :data:`NONINFERIOR` when the lower end is above ``−margin``,
    :data:`WORSE` when the upper end is below ``−margin``, :data:`NOT_SHOWN` when the interval contains
    ``−margin``; an interval wholly below 0 but reaching past ``−margin`` read "not shown" there.
    An end exactly at a boundary counts as containing it; :data:`NOT_MEASURED` for a ``nan`` interval.
    """
    if rule not in NONINFERIORITY_RULES:
        raise ValueError(f"rule must be one of {NONINFERIORITY_RULES}, got {rule!r}")
    if math.isnan(ci_low) or math.isnan(ci_high):
        return NOT_MEASURED
    if rule == "original":
        if ci_low > -margin:
            return NONINFERIOR
        return WORSE if ci_high < -margin else NOT_SHOWN
    if ci_high < 0.0:
        return WORSE_WITHIN_MARGIN if ci_low > -margin else WORSE
    return NONINFERIOR if ci_low > -margin else NOT_SHOWN


def verdict(direction: str | None, ci_low: float, ci_high: float, rule: str = "amended") -> str:
    """Read the interval of OPCT − BCT against the paper's side (``"lower"``, ``"higher"`` or :data:`NO_WORSE`).

    :data:`HOLDS` when the interval excludes 0 on the paper's side, :data:`REVERSED` when it excludes
    0 on the other side, :data:`NOT_RESOLVED` when it contains 0 (an end at exactly 0 counts as
    containing it); :data:`NOT_MEASURED` for a ``nan`` interval, :data:`NO_CLAIM` without a side. A
    :data:`NO_WORSE` claim is read by :func:`noninferiority_verdict` (margin :data:`NONINFERIORITY_MARGIN`,
    its ``rule``).
    """
    if direction == NO_WORSE:
        return noninferiority_verdict(ci_low, ci_high, rule=rule)
    if direction not in ("lower", "higher"):
        if direction is not None:
            raise ValueError(f"direction must be 'lower', 'higher' or {NO_WORSE!r}, got {direction!r}")
        return NO_CLAIM
    if math.isnan(ci_low) or math.isnan(ci_high):
        return NOT_MEASURED
    if ci_low > 0.0:
        return HOLDS if direction == "higher" else REVERSED
    if ci_high < 0.0:
        return HOLDS if direction == "lower" else REVERSED
    return NOT_RESOLVED


def neutral_verdict(a: str, b: str, ci_low: float, ci_high: float) -> str:
    """Read the interval of ``a − b`` with no side taken: ``"ACT higher"`` when it excludes 0 above,
    ``"ACT lower"`` below, :data:`NOT_RESOLVED` when it contains 0, :data:`NOT_MEASURED` for ``nan``."""
    if math.isnan(ci_low) or math.isnan(ci_high):
        return NOT_MEASURED
    if ci_low > 0.0:
        return f"{method_label(a)} higher"
    if ci_high < 0.0:
        return f"{method_label(a)} lower"
    return NOT_RESOLVED


def split_run_key(key: str, seeds: Sequence[int]) -> tuple[str, int | None]:
    """``(method, seed)`` of an experiment's model key: ``opct-s2`` -> ``("opct", 2)`` when the plan has
    several seeds, ``opct`` -> ``("opct", seeds[0])`` when it has one; ``base`` -> ``("base", None)``."""
    if key == "base":
        return key, None
    if len(seeds) > 1:
        for seed in seeds:
            if key.endswith(f"-s{seed}"):
                return key.removesuffix(f"-s{seed}"), seed
        return key, None
    return key, (seeds[0] if seeds else None)


def plan_seeds(exp: Experiment) -> list[int]:
    """The seeds of an experiment's plan (``[0]`` when the plan does not say)."""
    return [int(s) for s in exp.plan.get("seeds", [0])]


def run_methods(exp: Experiment) -> list[str]:
    """The methods of ``exp``'s runs, in plan order (``["base", "bct", "opct"]`` for ``base, bct-s0, …``)."""
    seeds = plan_seeds(exp)
    return list(dict.fromkeys(split_run_key(key, seeds)[0] for key in exp.methods))


def seed_runs(exp: Experiment, method: str) -> dict[int, str]:
    """``{seed: model key}`` of ``method``'s runs in ``exp`` (``{0: "opct"}``, ``{0: "opct-s0", 1: ...}``)."""
    seeds = plan_seeds(exp)
    out = {}
    for key in exp.methods:
        name, seed = split_run_key(key, seeds)
        if name == method and seed is not None:
            out[seed] = key
    return out


@dataclass
class PooledRow:
    """One metric of the pooled comparison."""

    column: Column
    difference: PooledDifference
    #: (family, seed) cells the plans have: the cells measured are ``difference.cells``.
    expected_cells: int
    #: Rows left out of the metric as unscored, by method and outcome class, summed over the cells.
    unscored: dict[str, dict[str, int]] = field(default_factory=dict)
    #: ``family/run`` of every run whose eval behind this metric is incomplete.
    incomplete: list[str] = field(default_factory=list)
    #: ``(a, b)`` of ``a − b``.
    pair: tuple[str, str] = PAPER_PAIR
    #: A "no worse" row's interval before the amendment of 2026-12-07 (the pooled bootstrap, no score
    #: interval); None for every other row.
    original: Estimate | None = None

    @property
    def direction(self) -> tuple[str, str] | None:
        """The paper's side and claim: only for :data:`PAPER_PAIR` (the paper claims nothing about other pairs)."""
        return paper_direction(self.column.key) if self.pair == PAPER_PAIR else None

    @property
    def verdict(self) -> str:
        est = self.difference.estimate
        if self.pair != PAPER_PAIR:
            return neutral_verdict(*self.pair, est.ci_low, est.ci_high)
        return verdict(self.direction[0] if self.direction else None, est.ci_low, est.ci_high)

    @property
    def original_verdict(self) -> str | None:
        """The verdict as pre-registered: the original interval read with the original rule (None: not a
        "no worse" row of the paper's pair)."""
        if self.original is None or self.pair != PAPER_PAIR:
            return None
        return verdict(NO_WORSE, self.original.ci_low, self.original.ci_high, rule="original")


def _paired_columns(exp: Experiment) -> dict[str, Column]:
    """``exp``'s results columns that have a paired reader, by key."""
    return {c.key: c for c in build_columns(exp) if c.paired is not None}


def pooled_rows(families: Mapping[str, Experiment], a: str = PAPER_PAIR[0], b: str = PAPER_PAIR[1], *,
                n_resamples: int = 2000, seed: int = DEFAULT_SEED,
                runs: Mapping[str, tuple[str | None, str | None]] | None = None) -> list[PooledRow]:
    """``a − b`` per results column, pooled over the families (``{family: its experiment}``) and the
    seeds both methods were trained with in each; a family's own column reader (its eval's units and
    statistic) reads its cells. Unscored rows never enter a cell (the axes' paired readers leave them
    out); their counts, and the incomplete evals, are carried on the row. A column no run reports is
    left out. ``runs`` (``{family: (method of a, method of b)}``) names, per family, whose runs stand
    for ``a`` and ``b`` (None: that family has none); by default ``a`` and ``b`` themselves."""
    own_columns = {family: _paired_columns(exp) for family, exp in families.items()}
    columns: dict[str, Column] = {}  # every family's, in first-seen order
    for per_family in own_columns.values():
        for key, column in per_family.items():
            columns.setdefault(key, column)
    rows = []
    for column in columns.values():
        cells, expected, statistic = {}, 0, None
        unscored: dict[str, dict[str, int]] = {a: {}, b: {}}
        incomplete: list[str] = []
        reported = False  # some run has the metric: a row even when no cell could be paired
        for family, exp in families.items():
            own_a, own_b = (runs or {}).get(family, (a, b))
            runs_a = seed_runs(exp, own_a) if own_a else {}
            runs_b = seed_runs(exp, own_b) if own_b else {}
            expected += len(plan_seeds(exp))
            own = own_columns[family].get(column.key)
            if own is None or own.paired is None:
                continue
            for s in sorted(set(runs_a) & set(runs_b)):
                values_a, stat = own.paired(exp, runs_a[s])
                values_b, _ = own.paired(exp, runs_b[s])
                statistic = statistic or stat
                if values_a and values_b:
                    cells[(family, s)] = (values_a, values_b)
                for method, key, values in ((a, runs_a[s], values_a), (b, runs_b[s], values_b)):
                    metric = own.get(exp, key)
                    if metric is None:
                        if values:  # records without results: an eval that stopped half-way
                            incomplete.append(f"{family}/{key} (unfinished)")
                        continue
                    reported = True
                    for outcome, count in metric.unscored.items():
                        unscored[method][outcome] = unscored[method].get(outcome, 0) + count
                    if metric.incomplete:
                        incomplete.append(f"{family}/{key}")
        if not cells and not reported:
            continue
        no_worse = (paper_direction(column.key) or ("",))[0] == NO_WORSE
        diff = pooled_paired_difference(cells, statistic, n_resamples=n_resamples, seed=seed, score=no_worse)
        rows.append(PooledRow(column, diff, expected, unscored, incomplete, (a, b), diff.bootstrap))
    return rows


def difference_parts(row: PooledRow) -> tuple[str, str]:
    """``("−3.4 pts", "[−8.0, +1.2]")`` for a rate, ``("+0.012", "[…]")`` for a score; ``("—", "")`` unmeasured.
    When a run behind the row is incomplete (:attr:`PooledRow.incomplete`) the value reads ``−3.4 pts INCOMPLETE``."""
    est = row.difference.estimate
    if math.isnan(est.value):
        return "—", ""
    scale, digits, unit = (100.0, 1, " pts") if row.column.percent else (1.0, 3, "")
    mark = " INCOMPLETE" if row.incomplete else ""
    return (f"{est.value * scale:+.{digits}f}{unit}{mark}",
            f"[{est.ci_low * scale:+.{digits}f}, {est.ci_high * scale:+.{digits}f}]")


def unscored_text(row: PooledRow) -> str:
    """``"OPCT 4 unparsed; BCT 0"``: the rows each method of the row's pair had left out as unscored, over every cell."""
    a, b = row.pair
    def one(method: str) -> str:
        counts = row.unscored.get(method, {})
        return f"{method_label(method)} " + (", ".join(f"{v} {k}" for k, v in counts.items()) if counts else "0")

    return f"{one(a)}; {one(b)}"


HOWTO = (
    "OPCT − BCT per metric, pooled over the families and seeds: in each (family, seed) cell the difference "
    "between the OPCT run and the BCT run of that seed on the units both were evaluated on (questions, "
    "behaviours, facts or items); the pooled value is the mean over families of the mean over seeds. The "
    "95% interval is a percentile bootstrap that resamples, each time, the units (one draw shared by every "
    "cell, so a unit counts once however many cells measured it) and, within each family, the seeds; the "
    "families are the fixed set being pooled. k: units; cells: (family, seed) cells measured of those "
    "planned. Unscored rows (empty, unparsed, judge abstained, errors) are left out, never counted as a "
    "success; their counts are shown. The verdict reads the interval against the paper's side: it holds "
    "when the interval excludes 0 on that side, is reversed when it excludes 0 on the other, and is not "
    "resolved when it contains 0. Capability's claim is OPCT no worse than BCT within 2 points, read on an interval "
    "widened to Tango's paired score interval at k units (it behaves at perfect agreement): it holds when the "
    "interval's lower end is above −2 points (and its upper end not below 0), is worse when the whole interval "
    "lies below 0 (\"worse, within the margin\" when its lower end is above −2), and is not shown otherwise "
    "(docs/metrics.md; before the amendment of 2026-12-07, shown beside it: the bootstrap interval alone, worse "
    "only when its upper end is below −2). INCOMPLETE beside a difference: a run behind it has an eval that stopped "
    "before every unit was measured (unfinished) or left more records unscored than its limit; the "
    "difference is over what was measured and is not a measurement."
)


def pooled_record(row: PooledRow) -> dict[str, Any]:
    """A pooled row as ``report.json`` holds it: the difference, its interval, rows, units and cells, per family
    and per cell, what was left unscored, the verdict and the texts the tables show."""
    est, diff = row.difference.estimate, row.difference
    direction = row.direction
    return {"key": row.column.key, "header": row.column.header, "percent": row.column.percent,
            "paper_side": direction[0] if direction else None, "claim": direction[1] if direction else None,
            "value": json_number(est.value), "ci_low": json_number(est.ci_low), "ci_high": json_number(est.ci_high),
            "rows": est.n, "units": est.clusters, "cells": diff.cells, "cells_planned": row.expected_cells,
            "per_family": {str(f): json_number(v) for f, v in diff.per_family.items()},
            "per_cell": {f"{f}/s{s}": json_number(v) for (f, s), v in diff.per_cell.items()},
            "unscored": row.unscored, "incomplete": row.incomplete, "verdict": row.verdict,
            "method": est.method, **original_record(row.original, row.original_verdict),
            "text": {"difference": list(difference_parts(row)), "unscored": unscored_text(row)}}


def original_record(original: Estimate | None, original_verdict: str | None) -> dict[str, Any]:
    """``{"before_amendment": {...}}`` for a "no worse" row: its interval, method and verdict as pre-registered
    (docs/metrics.md); ``{}`` for every other row."""
    if original is None:
        return {}
    return {"before_amendment": {"date": AMENDED, "ci_low": json_number(original.ci_low),
                                 "ci_high": json_number(original.ci_high), "method": original.method,
                                 "verdict": original_verdict}}
