"""The report's answer, first on the page: the verdict block (OPCT − BCT per metric against the paper), the
warnings as sentences by run, and the forest plot of every paired difference."""

from __future__ import annotations

from markupsafe import Markup

from opct.report.html_parts import figure_item, verdict_items
from opct.report.notices import warning_groups
from opct.report.section import ReportInputs, SectionData, render_template
from opct.report.verdict import HOWTO as VERDICT_HOWTO
from opct.report.verdict import verdict_lines, verdict_markdown

#: The figure section of the forest plot (:mod:`opct.report.forest`), shown under the verdict block, not with the axes.
VERDICT = "verdict"
FOREST_HOWTO = (
    "Every paired difference between two methods, one panel per metric (points for rates), with its 95% paired "
    "cluster bootstrap interval: a point left of the line at 0 means the first method of the pair is lower. "
    "OPCT − BCT is blue, with an arrow to the side the paper claims (capability: a dashed line at −2 points, "
    "the non-inferiority margin, and an arrow right of it); a hollow point is INCOMPLETE."
)


class VerdictSection:
    """The verdict lines, the warnings and the forest plot (each left out when there is none; with none of
    them the section writes nothing)."""

    name, order = "verdict", 10

    def data(self, report: ReportInputs) -> SectionData | None:
        # The warnings are read when the section is written, after every section has read its files (a
        # section's reading may add one, as the ablation's unreadable compute does).
        return {"exp": report.exp, "lines": verdict_lines(report.differences or []),
                "forest_files": [f for f in report.figures if f.section == VERDICT], "figures_dir": report.figures_dir}

    def markdown(self, data: SectionData) -> str:
        out = verdict_markdown(data["lines"])
        for run, lines in warning_groups(data["exp"]):
            out += [f"**Warnings: {run}**", "", *(f"- {line}" for line in lines), ""]
        for f in data["forest_files"]:
            out += [f"![{f.name.replace('_', ' ')}]({data['figures_dir']}/{f.path.name})", "", FOREST_HOWTO, ""]
        return "\n".join(out)

    def html(self, data: SectionData) -> Markup:
        groups = warning_groups(data["exp"])
        return render_template("sections/verdict.html.jinja", {
            "verdict": verdict_items(data["lines"]), "verdict_howto": VERDICT_HOWTO,
            "warnings": groups, "warning_count": sum(len(lines) for _, lines in groups),
            "forest": [figure_item(f) for f in data["forest_files"]], "forest_howto": FOREST_HOWTO})


VERDICT_SECTION = VerdictSection()
