"""Render the report as a self-contained HTML page (figures inlined as data URIs) and as Markdown.

Both renderings are built from the same :class:`Section` list. The HTML is the Jinja2 template
``templates/report.html.jinja``, autoescaped, given plain data (:mod:`opct.report.html_parts`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opct.evals.axis_registry import axes_with
from opct.evals.axis_views import ReportView
from opct.report.ablation import HOWTO as ABLATION_HOWTO
from opct.report.ablation import ablation_rows, ablation_table, is_ablation, largest_moves
from opct.report.figures import FigureFile
from opct.report.html_parts import (
    Table,
    figure_item,
    results_tables,
    simple_table,
    transposed_tables,
    verdict_items,
)
from opct.report.load import Experiment, Metric
from opct.report.notices import warning_groups
from opct.report.paired import HOWTO as PAIRED_HOWTO
from opct.report.paired import PairedDifference, paired_table
from opct.report.pooled import run_methods
from opct.report.selection import (
    PROFILE_HOWTO,
    RECIPE_HEADERS,
    best_rows,
    chosen_lines,
    family_lines,
    fmt_value,
    held_back_line,
    picks_table,
    profile_tables,
    recipe_rows,
    selection_markdown,
)
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
from opct.report.templating import render_page
from opct.report.verdict import HOWTO as VERDICT_HOWTO
from opct.report.verdict import verdict_lines, verdict_markdown
from opct.runs.experiment_layout import SAMPLES_HTML

HOW_TO_READ = {
    "results": (
        "Each cell is the point estimate, its 95% interval in brackets and n, the number of scored units behind "
        "it, followed by what was left out of n (empty, unparsed, judge abstained, error). Intervals are over the "
        "real units of variation: questions for sycophancy, behaviours crossed with templates for static "
        "jailbreaks, facts and their prompts for awareness (cluster-Wilson, never zero width). INCOMPLETE: more "
        "than the allowed share of that eval was unscored, so its number is not a measurement. ↓: lower is "
        "better, ↑: higher is better. Held-out means perturbation families (or safety facts) that training never "
        "saw, which is the generalisation OPCT is about. n = 0: the eval ran but scored nothing for that metric; "
        "failed: the eval stopped with that error; “—”: never planned for that method."
    ),
    "training": (
        "Per optimizer step: the training loss and, for OPCT, the per-token KL divergence from the student to "
        "its teacher (the same model with the clean prompt). Faint lines are raw values, bold lines a moving "
        "average. BCT and OPCT optimise different objectives, so compare the shapes of their loss curves, "
        "not their levels."
    ),
}


#: The section of the forest plot (:mod:`opct.report.forest`), shown under the verdict block, not with the axes.
VERDICT = "verdict"
FOREST_HOWTO = (
    "Every paired difference between two methods, one panel per metric (points for rates), with its 95% paired "
    "cluster bootstrap interval: a point left of the line at 0 means the first method of the pair is lower. "
    "OPCT − BCT is blue, with an arrow to the side the paper claims; a hollow point is INCOMPLETE."
)


@dataclass
class Section:
    """A report section: heading, how-to-read paragraph and its figures."""

    key: str
    title: str
    howto: str
    figures: list[FigureFile] = field(default_factory=list)


def build_sections(figures: Sequence[FigureFile]) -> list[Section]:
    """One section per registered axis with a report view (its title and how-to-read paragraph), then training, holding
    the figures drawn for each."""
    sections = [Section(VERDICT, "Every paired difference", FOREST_HOWTO)]
    sections += [Section(name, report.title, report.howto) for name, report in axes_with(ReportView)]
    sections.append(Section("training", "Training", HOW_TO_READ["training"]))
    by_key = {s.key: s for s in sections}
    for fig in figures:
        by_key[fig.section].figures.append(fig)
    return sections


def all_metrics_rows(exp: Experiment, eval_name: str) -> list[list[str]]:
    """Every metric of ``eval_name``, one row each, one column per method (rates as fractions)."""
    rows = []
    for key in exp.metric_keys(eval_name):
        cells = [_plain(metric) if (metric := exp.metric(m, eval_name, key)) is not None
                 else exp.last_absence or MISSING for m in exp.methods]
        rows.append([key, *cells])
    return rows


ATTACK_HEADERS = ["method", "defense vs adaptive attacker", "cracked by one static wrapper",
                  "search cracked of those", "search cracked, no single wrapper does", "median queries to crack"]
ATTACK_HOWTO = (
    "The adaptive per-target attacker searched for a jailbreak of every held-out behaviour within the same "
    "query budget against each model. The static baseline tries every single wrapper template once; the "
    "search is expected to find what those find and compositions they miss. Every cracking prompt is in "
    "attack/<method>/successes.jsonl."
)


def attack_howto(exp: Experiment) -> str:
    """:data:`ATTACK_HOWTO`, saying so when no attacked model has the static baseline."""
    if any(res and res.get("static") for res in exp.attack.values()):
        return ATTACK_HOWTO
    return ATTACK_HOWTO + (" The static baseline was not run here (`attack.static_baseline: false`), so its "
                           "three columns show —.")


def attack_rows(exp: Experiment) -> list[list[str]]:
    """One row per attacked method: defense success, the static baseline and what the search added."""
    rows = []
    for method in exp.methods:
        res = exp.attack.get(method)
        if not res:
            continue
        static = res.get("static", {})
        n = static.get("n", res.get("n", 0))
        beyond = static.get("search_beyond_static")
        rows.append([
            method_label(method),
            format_metric(exp.attack_metric(method, "dsr")),
            f"{static['static_cracked']}/{n}" if static else MISSING,
            f"{static['search_cracked_of_static']}/{static['static_cracked']}" if static else MISSING,
            str(len(beyond)) if beyond is not None else MISSING,
            str(res.get("queries_to_crack", {}).get("median") or MISSING),
        ])
    return rows


def _plain(metric: Metric | None) -> str:
    return format_metric(metric, percent=False)


def _figure_alt(fig: FigureFile) -> str:
    return fig.name.replace("_", " ")


# --------------------------------------------------------------------------- HTML (templates/report.html.jinja)


def _versions_table(manifest: dict[str, Any]) -> Table | None:
    versions = manifest.get("versions")
    if not isinstance(versions, dict) or not versions:
        return None
    return simple_table(["package", "version"], [[str(k), str(v)] for k, v in versions.items()])


Paired = tuple[list[str], list[list[str]]]
#: The ablation table (:func:`opct.report.ablation.ablation_table`) and its largest moves.
Ablation = tuple[list[str], list[list[str]], list[str]]


def ablation_parts(exp: Experiment) -> Ablation | None:
    """The ablation section's table and largest moves, or None when the experiment is not an ablation."""
    if not is_ablation(exp):
        return None
    rows = ablation_rows(exp)
    return (*ablation_table(rows), largest_moves(rows))


def selection_data(exp: Experiment) -> dict[str, Any] | None:
    """The selection table, the candidates of the methods this experiment ran only, and the picks."""
    methods = run_methods(exp)  # a run's method, without its seed
    sel = [r for r in best_rows(exp.selection) if r["method"] in methods]
    if not sel:
        return None
    candidates = simple_table(
        ["candidate", "recipe", "best step (KL)", "val teacher-KL", "val good-behaviour", "famval good-behaviour",
         "best family score (step)", "eligible steps"],
        [[r["id"], r["recipe"], str(r["step"]), f"{r['val_teacher_kl']:.3f}", f"{r['val_good']:.3f}",
          fmt_value(r["famval_good"]), r["family_score"], r["eligible_steps"]] for r in sel], "wrap")
    return {"family_lines": family_lines(exp.selection), "candidates": candidates,
            "picks": simple_table(*picks_table(exp.selection, methods), "wrap"),
            "chosen_lines": chosen_lines(exp.selection, methods)}


def _recipes(exp: Experiment) -> dict[str, Any] | None:
    recipes = recipe_rows(exp.plan, exp.selection)
    if not recipes:
        return None
    return {"howto": RECIPES_HOWTO, "table": simple_table(RECIPE_HEADERS, recipes, "wrap"), "held": held_back_line(exp.plan),
            "selection": selection_data(exp) if exp.selection else None}


def render_html(exp: Experiment, table: ResultsTable, sections: Sequence[Section], generated: str,
                paired: Paired | None = None, ablation: Ablation | None = None,
                links: Mapping[tuple[str, str], str] | None = None,
                differences: Sequence[PairedDifference] | None = None) -> str:
    """The whole report as one self-contained HTML document (``templates/report.html.jinja``): the answer
    first (the verdict block from ``differences``, :func:`opct.report.paired.paired_differences`'s, the
    warnings by run, the forest plot), then the details (``paired``: :func:`paired_table`'s result,
    ``ablation``: :func:`ablation_parts`'s; computed here when not given; ``links``: the results cells' links
    to ``samples.html``, :func:`opct.report.samples.cell_links`, none when not given)."""
    groups = warning_groups(exp)
    ablation = ablation or ablation_parts(exp)
    pheaders, prows = paired or paired_table(exp, table.columns, differences)
    attacks = attack_rows(exp)
    profiles = profile_tables(exp.diagnostics)
    return render_page(
        "report.html.jinja",
        title=f"OPCT experiment report: {exp.name}",
        meta=f"model {exp.model or MISSING} · methods {', '.join(method_label(m) for m in exp.methods) or MISSING} · {exp.root}",
        verdict=verdict_items(verdict_lines(differences or [])), verdict_howto=VERDICT_HOWTO,
        warnings=groups, warning_count=sum(len(lines) for _, lines in groups),
        forest=[figure_item(f) for s in sections if s.key == VERDICT for f in s.figures], forest_howto=FOREST_HOWTO,
        results_howto=HOW_TO_READ["results"], results_tables=results_tables(table, links),
        samples_link=SAMPLES_HTML if links else None, paper_tables=transposed_tables(PAPER_HEADERS, PAPER_ROWS),
        scale_note=scale_note(exp), recipes=_recipes(exp),
        profiles=[(cap, simple_table(head, rows, "wrap") if rows else None) for cap, head, rows in profiles],
        profile_howto=PROFILE_HOWTO,
        ablation={"howto": ABLATION_HOWTO, "tables": transposed_tables(ablation[0], ablation[1]), "moves": ablation[2]}
        if ablation else None,
        paired={"howto": PAIRED_HOWTO, "tables": transposed_tables(pheaders, prows, "metric")} if prows else None,
        attack={"howto": attack_howto(exp), "table": simple_table(ATTACK_HEADERS, attacks, "wrap")} if attacks else None,
        figure_sections=[{"key": s.key, "title": s.title, "howto": s.howto, "figures": [figure_item(f) for f in s.figures]}
                         for s in sections if s.figures and s.key != VERDICT],
        all_metrics=[(name, simple_table(["metric", *map(method_label, exp.methods)], all_metrics_rows(exp, name), "wrap"))
                     for name in exp.evals()],
        versions=_versions_table(exp.manifest),
        json_blocks=[(exp.layout.plan.name, json.dumps(exp.plan, indent=2, ensure_ascii=False, default=str)),
                     (exp.layout.manifest.name, json.dumps(exp.manifest, indent=2, ensure_ascii=False, default=str))],
        generated=generated,
    )


# --------------------------------------------------------------------------- Markdown

RECIPES_HOWTO = (
    "Each method trains with its own recipe. When the experiment names a selection, the recipes were chosen by "
    "`opct select` on the validation split (held back from the training families; held-out data never enters), "
    "by the rule named in the last column; the selection table below shows every candidate."
)


def recipes_md(exp: Experiment) -> list[str]:
    """The recipes section of the Markdown report and the runs' off-policy profile (each empty when not recorded)."""
    out: list[str] = []
    if recipes := recipe_rows(exp.plan, exp.selection):
        out += ["## Recipes", "", RECIPES_HOWTO, "", render_markdown(RECIPE_HEADERS, recipes), ""]
        if held := held_back_line(exp.plan):
            out += [f"*{held}*", ""]
        if exp.selection:
            out += [selection_markdown(exp.selection, run_methods(exp)).replace("## Recipe selection", "### Recipe selection"), ""]
    if profiles := profile_tables(exp.diagnostics):
        out += ["## Off-policy profile", "", PROFILE_HOWTO, ""]
        out += [x for cap, head, rows in profiles for x in (f"*{cap}*", "", render_markdown(head, rows) if rows else "", "")]
    return out


def render_md(exp: Experiment, table: ResultsTable, sections: Sequence[Section], generated: str, figures_dir: str = "figures",
              paired: Paired | None = None, ablation: Ablation | None = None, samples: bool = False,
              differences: Sequence[PairedDifference] | None = None) -> str:
    """The report as Markdown, its answer first (the verdict lines from ``differences``, the warnings by run,
    the forest plot), then the tables, how-to-read notes and links to the PNGs under ``figures_dir``
    (``samples``: say that ``samples.html`` holds every prompt and answer)."""
    out = [f"# OPCT experiment report: {exp.name}", "",
           f"Model `{exp.model or MISSING}`; methods {', '.join(method_label(m) for m in exp.methods) or MISSING}. Generated {generated}.", ""]
    out += verdict_markdown(verdict_lines(differences or []))
    for run, lines in warning_groups(exp):
        out += [f"**Warnings: {run}**", "", *(f"- {line}" for line in lines), ""]
    for f in (f for s in sections if s.key == VERDICT for f in s.figures):
        out += [f"![{_figure_alt(f)}]({figures_dir}/{f.path.name})", "", FOREST_HOWTO, ""]
    out += ["## Results", "", HOW_TO_READ["results"], "", render_markdown(table.headers, table.rows()), "",
            *([f"Every prompt, with each method's answer side by side: [{SAMPLES_HTML}]({SAMPLES_HTML}).", ""] if samples else []),
            "### The paper's reported numbers, for reference", "", render_markdown(PAPER_HEADERS, PAPER_ROWS), "", f"*{scale_note(exp)}*", ""]
    out += recipes_md(exp)
    ablation = ablation or ablation_parts(exp)
    if ablation:
        out += ["## Ablation: each variant minus the reference", "", ABLATION_HOWTO, "", render_markdown(ablation[0], ablation[1]), ""]
        out += ["Largest resolved move per metric:", "", *(f"- {line}" for line in ablation[2]), ""] if ablation[2] else []
    pheaders, prows = paired or paired_table(exp, table.columns, differences)
    if prows:
        out += ["## Paired differences between methods", "", PAIRED_HOWTO, "", render_markdown(pheaders, prows), ""]
    if attack_rows(exp):
        out += ["## Adaptive attacker", "", attack_howto(exp), "", render_markdown(ATTACK_HEADERS, attack_rows(exp)), ""]
    for s in sections:
        if not s.figures or s.key == VERDICT:
            continue
        out += [f"## {s.title}", "", s.howto, ""]
        out += [f"![{_figure_alt(f)}]({figures_dir}/{f.path.name})\n" for f in s.figures]
    out += ["## All metrics", ""]
    for eval_name in exp.evals():
        out += [f"### {eval_name}", "", render_markdown(["metric", *map(method_label, exp.methods)], all_metrics_rows(exp, eval_name)), ""]
    versions = exp.manifest.get("versions")
    if isinstance(versions, dict) and versions:
        out += ["## Versions", "", render_markdown(["package", "version"], [[str(k), str(v)] for k, v in versions.items()]), ""]
    return "\n".join(out).rstrip() + "\n"
