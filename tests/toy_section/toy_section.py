"""A toy report section as a plugin writes one, in this file only: how many optimizer steps each trained
method logged and its last loss. It goes into report.md, report.html (autoescaped), report.json and the
terminal summary; an experiment that trained nothing leaves it out."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from opct.report.section import ReportInputs, render_fragment
from opct.report.table import method_label, render_markdown

HEADERS = ["method", "steps logged", "last loss"]
TEMPLATE = """{%- from "macros.html.jinja" import table -%}
<section id="toy-steps">
<h2>Steps logged</h2>
<p class="note">{{ experiment }}: what each run's metrics.jsonl holds.</p>
{{ table({"headers": headers, "rows": rows, "class": "wrap"}) }}
</section>
"""


class StepsSection:
    """One row per method that trained: its logged steps and its last loss."""

    name = "toy-steps"
    order = 95  # after "all metrics" (90), before "experiment" (100)
    in_report_json = True

    def data(self, report: ReportInputs) -> dict[str, Any] | None:
        rows = [[method_label(method), str(len(records)), f"{records[-1]['loss']:.3f}"]
                for method, records in report.exp.train.items() if records and "loss" in records[-1]]
        return {"experiment": report.exp.name, "rows": rows} if rows else None

    def markdown(self, data: dict[str, Any]) -> str:
        return "\n".join(["## Steps logged", "", render_markdown(HEADERS, data["rows"]), ""])

    def html(self, data: dict[str, Any]) -> str:
        return render_fragment(TEMPLATE, {"headers": HEADERS, **data})

    def terminal(self, data: dict[str, Any]) -> list[RenderableType]:
        return [Text(f"{label}: {steps} steps logged, last loss {loss}") for label, steps, loss in data["rows"]]
