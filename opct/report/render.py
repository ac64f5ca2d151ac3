"""Render the experiment report as a self-contained HTML page (figures inlined as data URIs) and as Markdown.

Both are a page frame around the registered sections (:mod:`opct.report.section`), taken in order, each
section's data computed once for both. The HTML frame is the Jinja2 template ``templates/report.html.jinja``,
autoescaped; each section's part is its own template (``templates/sections/``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from markupsafe import Markup

from opct.report.experiment import Experiment
from opct.report.figures import FigureFile
from opct.report.paired import PairedDifference
from opct.report.section import (
    ReportInputs,
    Section,
    SectionData,
    json_sections,
    section_data,
)
from opct.report.table import MISSING, ResultsTable, method_label
from opct.report.templating import render_page

#: Every registered section that applies, with its data (:func:`opct.report.section.section_data`).
Parts = Sequence[tuple[Section, SectionData]]


def _methods(exp: Experiment) -> str:
    return ", ".join(method_label(m) for m in exp.methods) or MISSING


def html_page(report: ReportInputs, parts: Parts, generated: str) -> str:
    """The whole report as one self-contained HTML document: the frame, then each section's part in order."""
    exp = report.exp
    return render_page(
        "report.html.jinja", title=f"OPCT experiment report: {exp.name}",
        meta=f"model {exp.model or MISSING} · methods {_methods(exp)} · {exp.root}",
        sections=[Markup(section.html(data)) for section, data in parts], generated=generated)


def markdown_page(report: ReportInputs, parts: Parts, generated: str) -> str:
    """The report as Markdown: its title line, then each section's Markdown in order (an empty one left out)."""
    exp = report.exp
    out = [f"# OPCT experiment report: {exp.name}", "",
           f"Model `{exp.model or MISSING}`; methods {_methods(exp)}. Generated {generated}.", ""]
    out += [text for section, data in parts if (text := section.markdown(data))]
    return "\n".join(out).rstrip() + "\n"


def render_pages(exp: Experiment, table: ResultsTable, differences: Sequence[PairedDifference], figures: Sequence[FigureFile],
                 generated: str, links: Mapping[tuple[str, str], str] | None = None,
                 samples: bool = False) -> tuple[str, str, dict[str, SectionData]]:
    """report.html, report.md and what the sections put into report.json (:func:`json_sections`), each
    registered section's data computed once for the three (see :class:`ReportInputs` for the arguments)."""
    report = ReportInputs(exp, table, differences, figures, links=links, samples=samples)
    parts = section_data(report)
    return html_page(report, parts, generated), markdown_page(report, parts, generated), json_sections(parts)
