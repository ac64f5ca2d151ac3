"""The paper-style results table: one row per method, one column per safety axis and capability score.

Cells read ``value [ci_low, ci_high] (n=..)``; rates are shown in percent, areas (AUSC) as 0-1
scores; a metric a method lacks is "—". The paper's own numbers come as a second, fixed table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opct.report.load import Experiment, Metric

MISSING = "—"

METHOD_LABELS = {"base": "base", "bct": "BCT", "opct": "OPCT"}

#: Capability evals in the order the table shows them, with their display names.
CAPABILITY_EVALS = {
    "capability_mc": "MC",
    "capability_arithmetic": "arithmetic",
    "capability_format": "format",
    "capability_open": "open QA",
    "gpqa": "GPQA-D",
    "math500": "MATH-500",
    "ifeval": "IFEval",
    "mmlu": "MMLU",
}
#: The headline metric of a capability eval (``accuracy`` unless named here).
CAPABILITY_METRIC = {"ifeval": "prompt_level_strict_acc"}

MetricGetter = Callable[[Experiment, str], "Metric | None"]


def method_label(method: str) -> str:
    """The display name of a method (``bct`` -> ``BCT``)."""
    return METHOD_LABELS.get(method, method)


@dataclass(frozen=True)
class Column:
    """One table column: a header, how to read the metric for a method, and how to print it."""

    key: str
    title: str
    get: MetricGetter
    percent: bool = True
    #: "lower" or "higher": which direction is better.
    better: str = "higher"

    @property
    def header(self) -> str:
        return f"{self.title} {'↓' if self.better == 'lower' else '↑'}"


@dataclass(frozen=True)
class ResultsTable:
    """Headers, method rows and the metrics behind each cell."""

    columns: list[Column]
    methods: list[str]
    metrics: dict[tuple[str, str], Metric | None]

    def cell(self, method: str, column: Column) -> str:
        """The printed cell for ``method`` in ``column``."""
        return format_metric(self.metrics[(method, column.key)], percent=column.percent)

    def rows(self) -> list[list[str]]:
        """The table as strings: one row per method, label first."""
        return [[method_label(m)] + [self.cell(m, c) for c in self.columns] for m in self.methods]

    @property
    def headers(self) -> list[str]:
        return ["method"] + [c.header for c in self.columns]


def metric_parts(metric: Metric, percent: bool = True) -> tuple[str, str, str]:
    """``("41.0%", "[37.0, 45.0]", "(n=360)")``; the interval or n part is "" when unknown."""
    scale, digits, unit = (100.0, 1, "%") if percent else (1.0, 3, "")
    value = f"{metric.value * scale:.{digits}f}{unit}"
    interval = f"[{metric.ci_low * scale:.{digits}f}, {metric.ci_high * scale:.{digits}f}]" if metric.has_interval else ""
    n = f"(n={metric.n})" if metric.n is not None else ""
    return value, interval, n


def format_metric(metric: Metric | None, percent: bool = True) -> str:
    """``41.0% [37.0, 45.0] (n=360)`` for a rate, ``0.812 [0.770, 0.850] (n=50)`` for a score, "—" when absent."""
    if metric is None:
        return MISSING
    return " ".join(p for p in metric_parts(metric, percent) if p)


def _eval_metric(eval_name: str, key: str) -> MetricGetter:
    return lambda exp, method: exp.metric(method, eval_name, key)


def _attack_metric(key: str) -> MetricGetter:
    return lambda exp, method: exp.attack_metric(method, key)


def _any(exp: Experiment, get: MetricGetter) -> bool:
    return any(get(exp, m) is not None for m in exp.methods)


def awareness_key(exp: Experiment, eval_name: str = "awareness") -> str:
    """``ausc_101`` (the paper's AUSC), or ``ausc_9`` when only the 9-threshold area was reported."""
    if not _any(exp, _eval_metric(eval_name, "ausc_101")) and _any(exp, _eval_metric(eval_name, "ausc_9")):
        return "ausc_9"
    return "ausc_101"


def capability_evals(exp: Experiment) -> list[str]:
    """Capability evals with results, known ones in table order, then other ``capability_*`` evals."""
    present = set(exp.evals())
    known = [e for e in CAPABILITY_EVALS if e in present]
    return known + sorted(e for e in present if e.startswith("capability_") and e not in CAPABILITY_EVALS)


def capability_metric_key(eval_name: str) -> str:
    return CAPABILITY_METRIC.get(eval_name, "accuracy")


def capability_title(eval_name: str) -> str:
    return CAPABILITY_EVALS.get(eval_name, eval_name.removeprefix("capability_"))


def build_columns(exp: Experiment) -> list[Column]:
    """The table's columns for this experiment: the three axes, then each capability score."""
    cols = [Column("sycophancy", "Sycophancy rate (held-out)", _eval_metric("sycophancy", "sycophancy_rate"), better="lower")]
    if exp.attack:
        cols.append(Column("dsr_adaptive", "Defense success (adaptive attacker)", _attack_metric("dsr")))
    cols.append(Column("dsr_static", "Defense success (static held-out wrappers)", _eval_metric("jailbreak", "dsr")))
    key = awareness_key(exp)
    variant = "101-threshold" if key == "ausc_101" else "9-threshold"
    cols.append(Column("awareness", f"Awareness AUSC (held-out, {variant})", _eval_metric("awareness", key), percent=False))
    for name in capability_evals(exp):
        metric = capability_metric_key(name)
        title = f"{capability_title(name)} {'strict prompt acc.' if metric != 'accuracy' else 'accuracy'}"
        cols.append(Column(f"cap:{name}", title, _eval_metric(name, metric)))
    return cols


def build_table(exp: Experiment) -> ResultsTable:
    """The paper-style table of ``exp``."""
    columns = build_columns(exp)
    metrics = {(m, c.key): c.get(exp, m) for m in exp.methods for c in columns}
    return ResultsTable(columns, exp.methods, metrics)


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
