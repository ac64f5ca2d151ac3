"""The experiment report's extension point: a :class:`Section`, registered once in :data:`SECTIONS`.

``report.md`` and ``report.html`` are a page frame (title, the line under it, the footer) around the
registered sections, taken in :attr:`Section.order`. A section reads what the report has measured
(:class:`ReportInputs`: the experiment, its results table, the paired differences, the figures) once,
in :meth:`Section.data`, and turns that data into Markdown and into HTML. A section may also add its
data to ``report.json`` (``in_report_json = True``, under ``"sections"``) and lines to the terminal
summary (``terminal(data)``, rich renderables).

Adding a section takes one file::

    class Notes:
        name, order = "notes", 95          # after "all metrics" (90), before "experiment" (100)

        def data(self, report):            # None: the section does not apply to this experiment
            return {"n": len(report.exp.methods)}

        def markdown(self, data):
            return f"## Notes\\n\\n{data['n']} methods.\\n"

        def html(self, data):              # a Jinja2 fragment, autoescaped like the whole page
            return render_fragment('<section id="notes"><h2>Notes</h2><p>{{ n }} methods.</p></section>\\n', data)

    SECTIONS.register("notes", Notes())

The built-in sections live in :mod:`opct.report.sections`, registered below as ``"module:attr"``
strings (imported on first use, as :mod:`opct.registry` does everywhere); their HTML is in
``templates/sections/``, with the page's shared macros (``table``, ``figure``) in ``templates/macros.html.jinja``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from markupsafe import Markup

from opct.errors import OpctError
from opct.registry import Registry
from opct.report.experiment import Experiment
from opct.report.paired import PairedDifference
from opct.report.table import ResultsTable
from opct.report.templating import environment

if TYPE_CHECKING:  # figures.py loads matplotlib; a section only reads the saved files' records
    from opct.report.figures import FigureFile

#: A section's data: plain values for its Markdown and its template (None: the section does not apply).
SectionData = dict[str, Any]
#: The paired-differences table (:func:`opct.report.paired.paired_table`): headers and rows.
Paired = tuple[list[str], list[list[str]]]
#: The ablation table (:func:`opct.report.ablation.ablation_table`) and its largest moves.
Ablation = tuple[list[str], list[list[str]], list[str]]


@dataclass(frozen=True)
class ReportInputs:
    """What every section may read: measured once per report, shared by report.md, report.html and report.json."""

    exp: Experiment
    table: ResultsTable
    #: Every paired difference (:func:`opct.report.paired.paired_differences`; its bootstraps ran once); None:
    #: no verdict, and the paired table measures its own.
    differences: Sequence[PairedDifference] | None = None
    #: The figures drawn into ``figures/`` (:func:`opct.report.figures.make_figures`), each naming its section.
    figures: Sequence[FigureFile] = ()
    #: Where report.md links its figures from.
    figures_dir: str = "figures"
    #: The results cells' links to ``samples.html`` (:func:`opct.report.samples.cell_links`), none when empty.
    links: Mapping[tuple[str, str], str] | None = None
    #: Whether ``samples.html`` holds prompts and answers (report.md says so).
    samples: bool = False
    #: The paired table and the ablation table when the caller has them; the sections compute them otherwise.
    paired: Paired | None = None
    ablation: Ablation | None = None


@runtime_checkable
class Section(Protocol):
    """One part of the experiment report. Optional members: ``in_report_json`` (bool: its data goes into
    ``report.json["sections"][name]``, so it must be JSON) and ``terminal(data) -> list[RenderableType]``."""

    #: Its registered name (also the key of its data in report.json).
    name: str
    #: Where it stands on the page: lower first (the built-ins are 10, 20, ... 100).
    order: int

    def data(self, report: ReportInputs) -> SectionData | None:
        """What the section shows, or None when it does not apply to this experiment."""
        ...

    def markdown(self, data: SectionData) -> str:
        """The section in report.md: lines joined by newlines ("" leaves it out of report.md)."""
        ...

    def html(self, data: SectionData) -> str:
        """The section in report.html, written by a Jinja2 template (:func:`render_fragment`,
        :func:`render_template`), so that every text it shows is escaped."""
        ...


SECTIONS: Registry[Section] = Registry("report section")
for _name, _target in [
    ("verdict", "opct.report.sections.answer:VERDICT_SECTION"),
    ("judges", "opct.report.sections.judges:JUDGES_SECTION"),
    ("results", "opct.report.sections.results:RESULTS_SECTION"),
    ("recipes", "opct.report.sections.recipes:RECIPES_SECTION"),
    ("profile", "opct.report.sections.recipes:PROFILE_SECTION"),
    ("ablation", "opct.report.sections.comparisons:ABLATION_SECTION"),
    ("paired", "opct.report.sections.comparisons:PAIRED_SECTION"),
    ("attack", "opct.report.sections.comparisons:ATTACK_SECTION"),
    ("figures", "opct.report.sections.axis_figures:FIGURES_SECTION"),
    ("all-metrics", "opct.report.sections.results:ALL_METRICS_SECTION"),
    ("experiment", "opct.report.sections.results:EXPERIMENT_SECTION"),
]:
    SECTIONS.register(_name, _target)


class SectionError(OpctError, TypeError):
    """A registered report section that does not keep the :class:`Section` protocol."""


#: What a section must have, for the error that names what one lacks.
SECTION_MEMBERS = ("name", "order", "data", "markdown", "html")


def ordered_sections() -> list[Section]:
    """The registered sections by :attr:`Section.order` (registration order among equals). Raises
    :class:`SectionError` naming a registered entry that lacks a member of the protocol."""
    sections = []
    for name, section in SECTIONS.items():
        if missing := [m for m in SECTION_MEMBERS if not hasattr(section, m)]:
            raise SectionError(f"report section {name!r} ({type(section).__name__}) has no {', '.join(missing)}: a "
                               f"Section has {', '.join(SECTION_MEMBERS)} (opct/report/section.py)")
        sections.append(section)
    return sorted(sections, key=lambda s: s.order)


def section_data(report: ReportInputs) -> list[tuple[Section, SectionData]]:
    """Each registered section that applies to ``report``, in page order, with its data (computed once)."""
    return [(section, data) for section in ordered_sections() if (data := section.data(report)) is not None]


def render_template(template: str, data: Mapping[str, Any]) -> Markup:
    """``template`` (a file in ``opct/report/templates/``) rendered with ``data``, autoescaped."""
    return Markup(environment().get_template(template).render(**data))


def render_fragment(source: str, data: Mapping[str, Any]) -> Markup:
    """A Jinja2 ``source`` string rendered with ``data``, autoescaped (it may ``{% from "macros.html.jinja"
    import table %}``)."""
    return Markup(environment().from_string(source).render(**data))


def json_sections(parts: Sequence[tuple[Section, SectionData]]) -> dict[str, SectionData]:
    """The data of the sections that put theirs into ``report.json``, by name."""
    return {section.name: data for section, data in parts if getattr(section, "in_report_json", False)}
