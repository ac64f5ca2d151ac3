"""Paired differences between methods: every pair measured on the same units, with a paired cluster bootstrap.

Two models evaluated on the same questions, behaviours, facts or items are compared unit by unit:
the difference ``A − B`` of a column's statistic is computed on the units both have, and its 95%
interval comes from resampling those units jointly (:func:`opct.stats.paired.paired_cluster_difference`),
so the correlation between the two models' answers on one unit narrows the interval honestly rather
than being ignored. A "no worse" column (capability) widens it to the paired score interval, which
behaves at and near perfect agreement (:mod:`opct.stats.paired_proportions`). A column takes part when its axis gives it a ``paired`` reader (values per unit
for one method, and the statistic over units when it is not the pooled mean).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opct.evals.contract import Column, PairedValues
from opct.report.experiment import ATTACK, Experiment
from opct.report.pooled import NO_WORSE, paper_direction
from opct.report.table import MISSING, method_label
from opct.stats.estimate import Estimate
from opct.stats.paired import paired_cluster_difference, paired_score_widened

#: ``record -> value`` (``None``: the record does not enter this column).
RecordValue = Callable[[Mapping[str, Any]], "float | None"]


def record_values(eval_name: str, value: RecordValue, unit: Callable[[Mapping[str, Any]], str],
                  statistic: Callable[[list[list[float]]], float] | None = None) -> PairedValues:
    """A paired reader over the per-sample records of ``eval_name``: ``value(record)`` grouped by ``unit(record)``."""

    def read(exp: Experiment, method: str) -> tuple[dict[str, list[float]], Any]:
        out: dict[str, list[float]] = {}
        for r in exp.records(method, eval_name):
            v = value(r)
            if v is not None:
                out.setdefault(str(unit(r)), []).append(float(v))
        return out, statistic

    return read


def judged(record: Mapping[str, Any], key: str) -> float | None:
    """The judge score ``scores[key]`` of a record whose outcome is ``scored`` (records written before
    outcome classes count as scored), else ``None``: an empty, unparsed, abstained or errored record
    never enters a paired difference."""
    if record.get("outcome", "scored") != "scored":
        return None
    value = (record.get("scores") or {}).get(key)
    return None if value is None else float(value)


def attack_values(exp: Experiment, method: str) -> tuple[dict[str, list[float]], None]:
    """Per behaviour: 1 if the adaptive attacker never cracked it, 0 if it did; unscored behaviours, and those
    only degenerate replies defended, left out (neither is a defense)."""
    out: dict[str, list[float]] = {}
    for b in exp.attack.get(method, {}).get("behaviors", []):
        if b.get("status", "cracked" if b.get("cracked") else "defended") in ("unscored", "degenerate"):
            continue
        out[str(b["behavior_id"])] = [0.0 if b.get("cracked") else 1.0]
    return out, None


def meta_of(record: Mapping[str, Any], key: str) -> Any:
    """``record[key]``, else ``record["meta"][key]``."""
    return record.get(key) if record.get(key) is not None else (record.get("meta") or {}).get(key)


def method_pairs(methods: Sequence[str]) -> list[tuple[str, str]]:
    """``(A, B)`` for every two methods, the later one first: ``[opct−bct, opct−base, bct−base]``."""
    return [(methods[i], methods[j]) for i in range(len(methods) - 1, 0, -1) for j in range(i - 1, -1, -1)]


#: The mark beside a paired difference one of whose sides is no complete measurement.
INCOMPLETE = "INCOMPLETE"


def side_incomplete(exp: Experiment, column: Column, method: str, values: Mapping[str, list[float]]) -> bool:
    """Whether ``method``'s side of a paired difference in ``column`` is no complete measurement: its
    eval (or attack) stopped before every unit was measured (records but no results), has more
    unscored records than its limit (``status: incomplete``), or its records do not match its results
    (:attr:`~opct.report.experiment.Experiment.unverified`: a cut or edited ``samples.jsonl``)."""
    if (method, ATTACK if column.paired is attack_values else column.eval_name) in exp.unverified:
        return True
    metric = column.get(exp, method)
    if metric is None:
        return bool(values)  # records without results: an eval that stopped half-way
    return metric.incomplete


@dataclass(frozen=True)
class PairedDifference:
    """``a − b`` in one results column, measured once: its estimate (``None`` when the two share no unit)
    and whether either side is no complete measurement (:func:`side_incomplete`)."""

    a: str
    b: str
    column: Column
    estimate: Estimate | None
    incomplete: bool = False
    most: int = 0  # the units the side with more has: fewer shared is said, "(k=2 of 100)"
    #: A "no worse" column's interval before the amendment of 2026-12-07 (the bootstrap alone); None otherwise.
    original: Estimate | None = None

    @property
    def label(self) -> str:
        """``"OPCT − BCT"``."""
        return f"{method_label(self.a)} − {method_label(self.b)}"

    def parts(self) -> tuple[str, ...]:
        """``("−3.4 pts", "[−8.0, +1.2]", "(k=31)")`` (``(k=2 of 100)`` when the two share fewer units than one
        of them has), ``("—",)`` without shared units, a fourth part
        ``INCOMPLETE`` when either side is no complete measurement."""
        est = self.estimate
        if est is None:
            return (MISSING,)
        scale, digits, unit = (100.0, 1, " pts") if self.column.percent else (1.0, 3, "")
        k = f"(k={est.clusters})" if est.clusters >= self.most else f"(k={est.clusters} of {self.most})"
        parts = (f"{est.value * scale:+.{digits}f}{unit}", f"[{est.ci_low * scale:+.{digits}f}, {est.ci_high * scale:+.{digits}f}]", k)
        return (*parts, INCOMPLETE) if self.incomplete else parts


def paired_difference(exp: Experiment, column: Column, a: str, b: str) -> PairedDifference:
    """``a − b`` in ``column`` on the units both have, with its paired cluster bootstrap interval (widened to the
    paired score interval in a "no worse" column, whose bootstrap interval is kept as ``original``)."""
    assert column.paired is not None
    values_a, statistic = column.paired(exp, a)
    values_b, _ = column.paired(exp, b)
    if not set(values_a) & set(values_b):
        return PairedDifference(a, b, column, None)
    no_worse = (paper_direction(column.key) or ("",))[0] == NO_WORSE
    bootstrap = paired_cluster_difference(values_a, values_b, statistic)
    est, original = ((paired_score_widened(bootstrap, values_a, values_b), bootstrap) if no_worse and statistic is None
                     else (bootstrap, bootstrap if no_worse else None))
    incomplete = side_incomplete(exp, column, a, values_a) or side_incomplete(exp, column, b, values_b)
    return PairedDifference(a, b, column, est, incomplete, max(len(values_a), len(values_b)), original)


def paired_differences(exp: Experiment, columns: Sequence[Column]) -> list[PairedDifference]:
    """Every pair of methods (:func:`method_pairs`) in every results column that has a paired reader, each
    measured once, pair by pair; a pair none of whose columns has shared units is left out. None in an
    ablation (:mod:`opct.report.ablation` pools its pairs over the seeds instead)."""
    cols = [c for c in columns if c.paired is not None]
    if exp.plan.get("reference"):  # an ablation: its own table compares each variant with the reference
        return []
    out: list[PairedDifference] = []
    for a, b in method_pairs(exp.methods):
        diffs = [paired_difference(exp, c, a, b) for c in cols]
        if any(d.estimate is not None for d in diffs):
            out += diffs
    return out


def paired_parts(exp: Experiment, columns: Sequence[Column],
                 differences: Sequence[PairedDifference] | None = None) -> tuple[list[Column], list[tuple[str, list[tuple[str, ...]]]]]:
    """The results columns that have a paired reader, and per pair of methods with any difference
    ``("OPCT − BCT", [cell parts per column])`` (see :meth:`PairedDifference.parts`). No pairs when
    fewer than two methods have results, or in an ablation; ``differences``: :func:`paired_differences`'s,
    computed when not given."""
    cols = [c for c in columns if c.paired is not None]
    differences = paired_differences(exp, columns) if differences is None else differences
    rows: dict[tuple[str, str], tuple[str, list[tuple[str, ...]]]] = {}
    for d in differences:
        rows.setdefault((d.a, d.b), (d.label, []))[1].append(d.parts())
    return cols, list(rows.values())


def paired_table(exp: Experiment, columns: Sequence[Column],
                 differences: Sequence[PairedDifference] | None = None) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the paired-differences table: one row per pair of methods, one column per
    results column that has a paired reader. Empty rows when fewer than two methods have results."""
    cols, rows = paired_parts(exp, columns, differences)
    headers = ["difference", *(c.header for c in cols)]
    return headers, [[label, *(" ".join(cell) for cell in cells)] for label, cells in rows]


HOWTO = (
    "Each cell is the difference between two methods in that column (percentage points for rates), measured "
    "on the units both were evaluated on (k: questions, behaviours, facts or items), with a 95% paired cluster "
    "bootstrap interval: the units are resampled together for both methods. An interval that contains 0 does "
    "not separate the two methods. ↓ / ↑ say which direction is better. INCOMPLETE beside a cell: one of the two "
    "methods' evals stopped before every unit was measured, left more records unscored than its limit, or has a "
    "samples.jsonl that does not match its results.json (see the warnings); the difference is over the units it has "
    "and is not a measurement. (k=2 of 100): the two methods share fewer units than one of them measured."
)
