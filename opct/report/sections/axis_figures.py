"""The report's figures beside the tables: one part per registered axis (its title, how-to-read paragraph and
the figures drawn for it) and one for training. The forest plot is the verdict's (:mod:`.answer`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from markupsafe import Markup

from opct.evals.axis_registry import axes_with
from opct.evals.axis_views import ReportView
from opct.report.html_parts import figure_item
from opct.report.section import ReportInputs, SectionData, render_template
from opct.report.sections.answer import VERDICT

if TYPE_CHECKING:  # figures.py loads matplotlib; only the saved files' records are read here
    from opct.report.figures import FigureFile

TRAINING_HOWTO = (
    "Per optimizer step: the training loss and, for OPCT, the per-token KL divergence from the student to "
    "its teacher (the same model with the clean prompt). Faint lines are raw values, bold lines a moving "
    "average. BCT and OPCT optimise different objectives, so compare the shapes of their loss curves, "
    "not their levels."
)


@dataclass
class FigureGroup:
    """The figures of one axis (or of training): heading, how-to-read paragraph and its figures."""

    key: str
    title: str
    howto: str
    figures: list[FigureFile] = field(default_factory=list)


def figure_groups(figures: Sequence[FigureFile]) -> list[FigureGroup]:
    """One group per registered axis, then training, holding the figures drawn for each; only those with figures."""
    groups = [FigureGroup(name, report.title or name.capitalize(), report.howto) for name, report in axes_with(ReportView)]
    groups.append(FigureGroup("training", "Training", TRAINING_HOWTO))
    by_key = {g.key: g for g in groups}
    for fig in figures:
        if fig.section != VERDICT:
            by_key[fig.section].figures.append(fig)
    return [g for g in groups if g.figures]


class FiguresSection:
    """Each axis's figures and the training curves, one heading each (left out when nothing was drawn)."""

    name, order = "figures", 80

    def data(self, report: ReportInputs) -> SectionData | None:
        groups = figure_groups(report.figures)
        return {"groups": groups, "figures_dir": report.figures_dir} if groups else None

    def markdown(self, data: SectionData) -> str:
        out: list[str] = []
        for g in data["groups"]:
            out += [f"## {g.title}", "", g.howto, ""]
            out += [f"![{f.name.replace('_', ' ')}]({data['figures_dir']}/{f.path.name})\n" for f in g.figures]
        return "\n".join(out)

    def html(self, data: SectionData) -> Markup:
        return render_template("sections/figures.html.jinja", {
            "figure_sections": [{"key": g.key, "title": g.title, "howto": g.howto, "figures": [figure_item(f) for f in g.figures]}
                                for g in data["groups"]]})


FIGURES_SECTION = FiguresSection()
