"""The paper-style results table: one row per method; columns from every registered axis.

Cells read ``value [ci_low, ci_high] (n=..)``; rates are shown in percent, areas (AUSC) as 0-1
scores. A planned metric without a number says why: ``n = 0`` (nothing scored), ``INCOMPLETE`` (the
eval did not finish or left too much unscored), ``failed: <reason>``; only a metric that was never
planned for a method is "—". The paper's own numbers come as a second, fixed table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from opct.evals.axis_registry import axes_with
from opct.evals.axis_views import ReportView
from opct.evals.contract import Column
from opct.methods import METHODS
from opct.report.experiment import Experiment
from opct.report.metric import Metric

MISSING = "—"


def method_label(method: str) -> str:
    """The display name of a method: a registered training method's card label (``BCT``, ``ACT``; a method
    registered without one: its name in capitals); anything else (``base``, a variant, a seed's run) as it is."""
    card = METHODS.card(method)
    return card.label if card is not None else method


@dataclass(frozen=True)
class ResultsTable:
    """Headers, method rows and the metrics behind each cell."""

    columns: list[Column]
    methods: list[str]
    metrics: dict[tuple[str, str], Metric | None]
    #: Why a planned cell has no number (``n = 0``, ``INCOMPLETE``, ``failed: ...``), by (method, column key).
    absent: dict[tuple[str, str], str] = field(default_factory=dict)

    def missing(self, method: str, column: Column) -> str:
        """What a cell without a metric shows: why it has no number, or "—" when it was never planned."""
        return self.absent.get((method, column.key), MISSING)

    def cell(self, method: str, column: Column) -> str:
        """The printed cell for ``method`` in ``column``."""
        metric = self.metrics[(method, column.key)]
        return self.missing(method, column) if metric is None else format_metric(metric, percent=column.percent)

    def rows(self) -> list[list[str]]:
        """The table as strings: one row per method, label first."""
        return [[method_label(m)] + [self.cell(m, c) for c in self.columns] for m in self.methods]

    @property
    def headers(self) -> list[str]:
        return ["method"] + [c.header for c in self.columns]


def metric_parts(metric: Metric, percent: bool = True) -> tuple[str, str, str]:
    """``("41.0%", "[37.0, 45.0]", "(n=360)")``; the interval or n part is "" when unknown. The n part
    also counts what was left out of n (``(n=360; 4 empty)``) and the failures kept in it (``(n=120; 22
    truncated counted wrong)``), and ends ``INCOMPLETE`` when the eval is."""
    scale, digits, unit = (100.0, 1, "%") if percent else (1.0, 3, "")
    value = f"{metric.value * scale:.{digits}f}{unit}"
    interval = f"[{metric.ci_low * scale:.{digits}f}, {metric.ci_high * scale:.{digits}f}]" if metric.has_interval else ""
    left_out = "; ".join([*(f"{v} {k}" for k, v in metric.unscored.items() if v),
                          *(f"{v} {k} counted wrong" for k, v in metric.counted_wrong.items() if v)])
    n = f"(n={metric.n}{'; ' + left_out if left_out else ''})" if metric.n is not None else ""
    if metric.incomplete:
        n = f"{n} INCOMPLETE".strip()
    return value, interval, n


def format_metric(metric: Metric | None, percent: bool = True) -> str:
    """``41.0% [37.0, 45.0] (n=360)`` for a rate, ``0.812 [0.770, 0.850] (n=50)`` for a score, "—" when absent."""
    if metric is None:
        return MISSING
    return " ".join(p for p in metric_parts(metric, percent) if p)


def build_columns(exp: Experiment) -> list[Column]:
    """The table's columns for this experiment: each registered axis's that gives a report view, in registration
    order (an axis without one has no column; its evals show in the per-eval tables)."""
    return [col for _, report in axes_with(ReportView) for col in report.columns(exp)]


def build_table(exp: Experiment) -> ResultsTable:
    """The paper-style table of ``exp``."""
    columns = build_columns(exp)
    metrics: dict[tuple[str, str], Metric | None] = {}
    absent: dict[tuple[str, str], str] = {}
    for m in exp.methods:
        for c in columns:
            exp.last_absence = None
            metrics[(m, c.key)] = c.get(exp, m)
            if metrics[(m, c.key)] is None and exp.last_absence:
                absent[(m, c.key)] = exp.last_absence
    return ResultsTable(columns, exp.methods, metrics, absent)


#: arXiv 2605.21834's headline numbers (abstract; averages over its three models).
PAPER_HEADERS = [
    "paper (arXiv 2605.21834)",
    "Sycophancy rate ↓ (avg. of 3 models)",
    "Held-out jailbreak defense vs adaptive attacker ↑",
    "Safety awareness (AUSC, 101-threshold)",
    "MATH-500 vs base",
]
PAPER_ROWS = [
    ["base", "15.4%", MISSING, MISSING, MISSING],
    ["SFT (≈ BCT)", "11.2%", "≈87%", "below OPCT in 2 of 3 models", "up to −28 points"],
    ["OPCT", "8.1%", "≈99%", "above SFT in 2 of 3 models, equal in 1", "largely no regression"],
]


def scale_note(exp: Experiment) -> str:
    """One line on how to compare this experiment's numbers with the paper's."""
    model = exp.model or "this model"
    if "organism" in model.lower() or "tiny" in model.lower():
        return (
            f"These numbers are a measurement on the tiny model “{model}”, not a reproduction target: "
            "compare the direction of the effects with the paper's, not their size."
        )
    return (
        f"The paper averages three 4–30B models; {model} is measured here, so compare the direction of "
        "the effects, not their size."
    )


def render_text(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table with aligned columns, for the terminal."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    out = ["| " + " | ".join(_md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)
