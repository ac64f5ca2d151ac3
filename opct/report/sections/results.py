"""The report's tables of numbers: the results (one row per method, one column per metric) with the paper's
numbers beside them, every metric of every eval, and the experiment's versions and files."""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup

from opct.report.experiment import Experiment
from opct.report.html_parts import results_tables, simple_table, transposed_tables
from opct.report.section import ReportInputs, SectionData, render_template
from opct.report.table import (
    MISSING,
    PAPER_HEADERS,
    PAPER_ROWS,
    ResultsTable,
    format_metric,
    method_label,
    render_markdown,
    scale_note,
)
from opct.runs.experiment_layout import SAMPLES_HTML

RESULTS_HOWTO = (
    "Each cell is the point estimate, its 95% interval in brackets and n, the number of scored units behind "
    "it, followed by what was left out of n (empty, unparsed, judge abstained, error). Intervals are over the "
    "real units of variation: questions for sycophancy, behaviours crossed with templates for static "
    "jailbreaks, facts and their prompts for awareness (cluster-Wilson, never zero width). INCOMPLETE: more "
    "than the allowed share of that eval was unscored, so its number is not a measurement. ↓: lower is "
    "better, ↑: higher is better. Held-out means perturbation families (or safety facts) that training never "
    "saw, which is the generalisation OPCT is about. n = 0: the eval ran but scored nothing for that metric; "
    "failed: the eval stopped with that error; “—”: never planned for that method."
)


class ResultsSection:
    """The results table (each cell linked to its samples when there are any) and the paper's numbers."""

    name, order = "results", 20

    def data(self, report: ReportInputs) -> SectionData | None:
        return {"exp": report.exp, "table": report.table, "links": report.links, "samples": report.samples}

    def markdown(self, data: SectionData) -> str:
        table: ResultsTable = data["table"]
        samples = [f"Every prompt, with each method's answer side by side: [{SAMPLES_HTML}]({SAMPLES_HTML}).", ""]
        return "\n".join(["## Results", "", RESULTS_HOWTO, "", render_markdown(table.headers, table.rows()), "",
                          *(samples if data["samples"] else []),
                          "### The paper's reported numbers, for reference", "", render_markdown(PAPER_HEADERS, PAPER_ROWS), "",
                          f"*{scale_note(data['exp'])}*", ""])

    def html(self, data: SectionData) -> Markup:
        return render_template("sections/results.html.jinja", {
            "results_howto": RESULTS_HOWTO, "results_tables": results_tables(data["table"], data["links"]),
            "samples_link": SAMPLES_HTML if data["links"] else None,
            "paper_tables": transposed_tables(PAPER_HEADERS, PAPER_ROWS), "scale_note": scale_note(data["exp"])})


def all_metrics_rows(exp: Experiment, eval_name: str) -> list[list[str]]:
    """Every metric of ``eval_name``, one row each, one column per method (rates as fractions)."""
    rows = []
    for key in exp.metric_keys(eval_name):
        cells = [format_metric(metric, percent=False) if (metric := exp.metric(m, eval_name, key)) is not None
                 else exp.last_absence or MISSING for m in exp.methods]
        rows.append([key, *cells])
    return rows


class AllMetricsSection:
    """Every metric each eval reported, one table per eval (always on the page, empty without evals)."""

    name, order = "all-metrics", 90

    def data(self, report: ReportInputs) -> SectionData | None:
        exp = report.exp
        return {"headers": ["metric", *map(method_label, exp.methods)],
                "evals": [(name, all_metrics_rows(exp, name)) for name in exp.evals()]}

    def markdown(self, data: SectionData) -> str:
        out = ["## All metrics", ""]
        for eval_name, rows in data["evals"]:
            out += [f"### {eval_name}", "", render_markdown(data["headers"], rows), ""]
        return "\n".join(out)

    def html(self, data: SectionData) -> Markup:
        return render_template("sections/all_metrics.html.jinja", {
            "all_metrics": [(name, simple_table(data["headers"], rows, "wrap")) for name, rows in data["evals"]]})


def tested_versions_text(tested: dict[str, Any]) -> str:
    """One cell for a manifest's ``tested_versions`` (:func:`opct.runs.manifest.tested_versions`): the
    constraints file and its hash, and whether every installed pin matched it, or which did not."""
    head = f"{tested.get('file')} {str(tested.get('sha256'))[:12]}"
    differs = tested.get("differs") or {}
    if not differs:
        return f"{head}: all {tested.get('matched')} installed pins match"
    listed = ", ".join(f"{name} {v.get('installed')} (tested {v.get('tested')})" for name, v in sorted(differs.items()))
    return f"{head}: {len(differs)} differ: {listed}"


class ExperimentSection:
    """The package versions the run recorded; on the page also its plan and manifest as JSON."""

    name, order = "experiment", 100

    def data(self, report: ReportInputs) -> SectionData | None:
        exp = report.exp
        versions = exp.manifest.get("versions")
        rows = [[str(k), str(v)] for k, v in versions.items()] if isinstance(versions, dict) else []
        tested = exp.manifest.get("tested_versions")
        if rows and isinstance(tested, dict):
            rows.append(["tested versions", tested_versions_text(tested)])
        return {"versions": rows,
                "files": [(exp.layout.plan.name, exp.plan), (exp.layout.manifest.name, exp.manifest)]}

    def markdown(self, data: SectionData) -> str:
        if not data["versions"]:
            return ""
        return "\n".join(["## Versions", "", render_markdown(["package", "version"], data["versions"]), ""])

    def html(self, data: SectionData) -> Markup:
        return render_template("sections/experiment.html.jinja", {
            "versions": simple_table(["package", "version"], data["versions"]) if data["versions"] else None,
            "json_blocks": [(name, json.dumps(content, indent=2, ensure_ascii=False, default=str))
                            for name, content in data["files"]]})


RESULTS_SECTION = ResultsSection()
ALL_METRICS_SECTION = AllMetricsSection()
EXPERIMENT_SECTION = ExperimentSection()
