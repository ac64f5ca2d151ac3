"""The report's answer first: one verdict line per metric for OPCT − BCT, and ``report.json``.

A verdict line reads the paired difference OPCT − BCT of one results column (measured once, by
:func:`opct.report.paired.paired_differences`) against the paper's side of 0 for that column
(:func:`opct.report.pooled.paper_direction`, from each axis), with the same reading a study's pooled verdict uses
(:func:`opct.report.pooled.verdict`): the paper's direction holds, is reversed, or is not resolved.
A difference one of whose sides is no complete measurement keeps its verdict and says INCOMPLETE beside
it. ``report.json`` holds every number of the experiment's report (each method's metrics, the verdict
lines, every paired difference) with the commit and time of the run, for scripts such as
``benchmarks/readme_results.py``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opct.report.experiment import Experiment
from opct.report.metric import Metric, json_number
from opct.report.paired import PairedDifference
from opct.report.pooled import (
    AMENDED,
    HOLDS,
    NO_WORSE,
    NONINFERIOR,
    NONINFERIORITY_MARGIN,
    NOT_MEASURED,
    PAPER_PAIR,
    REVERSED,
    WORSE,
    WORSE_WITHIN_MARGIN,
    original_record,
    paper_direction,
    verdict,
)
from opct.report.table import ResultsTable

#: The paper's side, in words: of 0, or of the non-inferiority margin (capability).
SIDE_WORDS = {"lower": "OPCT lower", "higher": "OPCT higher",
              NO_WORSE: f"OPCT no worse than BCT within {NONINFERIORITY_MARGIN * 100:g} pts"}
#: The HTML class of a verdict line (its colour); any other verdict reads "open".
HOLDS_CLASS = {HOLDS: "holds", REVERSED: "reversed", NONINFERIOR: "holds", WORSE: "reversed",
               WORSE_WITHIN_MARGIN: "reversed"}
HOWTO = (
    "One line per metric: the side of 0 the paper claims for OPCT − BCT, the difference measured here on the units "
    "both methods were evaluated on with its 95% paired cluster bootstrap interval and k units, and the verdict: "
    "the paper's direction holds when the interval excludes 0 on the paper's side, is reversed when it excludes 0 "
    "on the other side, and is not resolved when it contains 0. Capability's claim is OPCT no worse than BCT "
    f"within {NONINFERIORITY_MARGIN * 100:g} points (docs/metrics.md), read on the interval widened to Tango's "
    "paired score interval (it behaves at perfect agreement): it holds when the interval's lower end is "
    f"above −{NONINFERIORITY_MARGIN * 100:g} points and its upper end not below 0, is worse when the whole interval "
    f"lies below 0 (\"worse, within the margin\" when its lower end is above −{NONINFERIORITY_MARGIN * 100:g}), and "
    "is not shown otherwise; \"before the amendment\" gives the interval and verdict as first registered "
    "(the bootstrap alone; worse only when its upper end is below the margin). INCOMPLETE: a side of the difference left more "
    "unscored than its limit or stopped early; the difference is over what both scored and is not a measurement."
)


@dataclass(frozen=True)
class VerdictLine:
    """One metric's OPCT − BCT and its reading against the paper's side."""

    difference: PairedDifference
    #: ``"lower"`` or ``"higher"``, None when the paper makes no claim about the metric.
    side: str | None
    claim: str | None
    verdict: str
    #: A "no worse" line's verdict as first registered (its bootstrap interval, the original rule); else None.
    original_verdict: str | None = None

    @property
    def header(self) -> str:
        return self.difference.column.header

    @property
    def side_text(self) -> str:
        """``"OPCT lower"``, ``"OPCT no worse than BCT within 2 pts"``, or ``"no claim"``."""
        return SIDE_WORDS.get(self.side or "", "no claim")

    @property
    def difference_text(self) -> str:
        """``"−3.4 pts [−8.0, +1.2] (k=31)"`` (``INCOMPLETE`` at the end when it is), ``"—"`` unmeasured."""
        return " ".join(self.difference.parts())

    @property
    def original_text(self) -> str:
        """``"before the amendment of 2026-12-07: [−4.2, +0.0], not shown"`` when the interval or the verdict
        as first registered differs from this one; ``""`` otherwise."""
        original, est = self.difference.original, self.difference.estimate
        if original is None or est is None or self.original_verdict is None:
            return ""
        if (original.ci_low, original.ci_high, self.original_verdict) == (est.ci_low, est.ci_high, self.verdict):
            return ""
        scale, digits = (100.0, 1) if self.difference.column.percent else (1.0, 3)
        return (f"before the amendment of {AMENDED}: [{original.ci_low * scale:+.{digits}f}, "
                f"{original.ci_high * scale:+.{digits}f}], {self.original_verdict}")

    def sentence(self) -> str:
        """``"sycophancy rate ↓: paper OPCT lower; OPCT − BCT −0.5 pts [−1.6, +0.0] (k=40): not resolved."``"""
        note = f" ({self.original_text})" if self.original_text else ""
        return f"{self.header}: paper {self.side_text}; OPCT − BCT {self.difference_text}: {self.verdict}{note}."


def verdict_lines(differences: Sequence[PairedDifference]) -> list[VerdictLine]:
    """One line per results column of the OPCT − BCT differences among ``differences`` (none when the
    experiment has no such pair), in the columns' order."""
    lines = []
    for d in differences:
        if (d.a, d.b) != PAPER_PAIR:
            continue
        direction = paper_direction(d.column.key)
        side, claim = direction if direction else (None, None)
        est = d.estimate
        reading = verdict(side, est.ci_low, est.ci_high) if est is not None else NOT_MEASURED
        original = (verdict(side, d.original.ci_low, d.original.ci_high, rule="original")
                    if d.original is not None else None)
        lines.append(VerdictLine(d, side, claim, reading, original))
    return lines


def _metric(metric: Metric | None) -> dict[str, Any] | None:
    return None if metric is None else metric.to_dict()


def difference_record(d: PairedDifference) -> dict[str, Any]:
    """A paired difference as JSON: the pair, the column, value, interval, units k, INCOMPLETE and its text."""
    est = d.estimate
    return {"a": d.a, "b": d.b, "key": d.column.key, "header": d.column.header, "percent": d.column.percent,
            "value": json_number(est.value) if est else None, "ci_low": json_number(est.ci_low) if est else None,
            "ci_high": json_number(est.ci_high) if est else None, "units": est.clusters if est else 0,
            "method": est.method if est else None,
            "incomplete": d.incomplete, "text": " ".join(d.parts())}


def report_data(exp: Experiment, table: ResultsTable, differences: Sequence[PairedDifference]) -> dict[str, Any]:
    """Everything ``report.json`` holds: the run's commit and start time (its manifest's), each method's
    metric per results column, the verdict lines and every paired difference."""
    manifest = exp.manifest or {}
    results = {m: {c.key: _metric(table.metrics.get((m, c.key))) for c in table.columns} for m in table.methods}
    return {
        "experiment": exp.name, "model": exp.model, "opct_commit": manifest.get("opct_commit"),
        "created": manifest.get("created"), "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "methods": list(table.methods),
        "metrics": [{"key": c.key, "header": c.header, "percent": c.percent, "better": c.better} for c in table.columns],
        "results": results,
        "verdict": [{**difference_record(v.difference), "paper_side": v.side, "claim": v.claim, "verdict": v.verdict,
                     **original_record(v.difference.original, v.original_verdict)}
                    for v in verdict_lines(differences)],
        "paired": [difference_record(d) for d in differences],
    }


def verdict_markdown(lines: Sequence[VerdictLine]) -> list[str]:
    """The verdict block as Markdown lines (none without lines)."""
    if not lines:
        return []
    return ["## Verdict: OPCT − BCT against the paper", "", HOWTO, "",
            *(f"- **{v.header}**: " + (f"paper {v.side_text}; " if v.side else "")
              + f"OPCT − BCT {v.difference_text}: **{v.verdict}**"
              + (f" ({v.original_text})" if v.original_text else "") for v in lines), ""]
