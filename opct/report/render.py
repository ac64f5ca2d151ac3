"""Render the report as a self-contained HTML page (figures inlined as data URIs) and as Markdown.

Both renderings are built from the same :class:`Section` list. Every piece of text that goes into
the HTML is escaped; the only markup is this module's own.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from opct.evals.axis_registry import AXES
from opct.report.ablation import HOWTO as ABLATION_HOWTO
from opct.report.ablation import ablation_rows, ablation_table, is_ablation, largest_moves
from opct.report.figures import FigureFile
from opct.report.html_parts import (
    CSS,
    results_table_html,
    simple_table_html,
    tag,
    transposed_tables_html,
    verdict_html,
    warnings_html,
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
    """One section per registered axis (its title and how-to-read paragraph), then training, holding
    the figures drawn for each."""
    sections = [Section(VERDICT, "Every paired difference", FOREST_HOWTO)]
    sections += [Section(name, axis.title or name.capitalize(), axis.howto) for name, axis in AXES.items()]
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


# --------------------------------------------------------------------------- HTML



def _samples_note(links: Mapping[tuple[str, str], str] | None) -> list[str]:
    if not links:
        return []
    link = f'<a href="{SAMPLES_HTML}">{SAMPLES_HTML}</a>'
    return [f'<p class="note">Each cell links to its prompts, with every method’s answers, on {link}.</p>']


def _img_html(fig: FigureFile) -> str:
    data = base64.b64encode(fig.path.read_bytes()).decode("ascii")
    alt = _figure_alt(fig)
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{escape(alt, quote=True)}" '
            f'data-text-px="{fig.min_text_px:.1f}"></figure>')


def _json_block(title: str, data: dict[str, Any]) -> str:
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    return f"<details>{tag('summary', title)}{tag('pre', text)}</details>"


def _versions_html(manifest: dict[str, Any]) -> str:
    versions = manifest.get("versions")
    if not isinstance(versions, dict) or not versions:
        return ""
    rows = [[str(k), str(v)] for k, v in versions.items()]
    return tag("h3", "Versions") + simple_table_html(["package", "version"], rows)


Paired = tuple[list[str], list[list[str]]]
#: The ablation table (:func:`opct.report.ablation.ablation_table`) and its largest moves.
Ablation = tuple[list[str], list[list[str]], list[str]]


def ablation_parts(exp: Experiment) -> Ablation | None:
    """The ablation section's table and largest moves, or None when the experiment is not an ablation."""
    if not is_ablation(exp):
        return None
    rows = ablation_rows(exp)
    return (*ablation_table(rows), largest_moves(rows))


def _figure_sections_html(sections: Sequence[Section]) -> list[str]:
    parts = []
    for s in sections:
        if not s.figures or s.key == VERDICT:
            continue
        parts += [f'<section id="{escape(s.key, quote=True)}">', tag("h2", s.title), tag("p", s.howto, class_="howto")]
        parts += [_img_html(f) for f in s.figures]
        parts.append("</section>")
    return parts


def _answer_html(exp: Experiment, sections: Sequence[Section], differences: Sequence[PairedDifference] | None) -> list[str]:
    """The first screen: the verdict block (OPCT − BCT per metric), the warnings by run, the forest plot."""
    parts = []
    lines = verdict_lines(differences or [])
    if lines:
        parts += ['<section id="verdict">', tag("h2", "Verdict: OPCT − BCT against the paper"), verdict_html(lines),
                  tag("p", VERDICT_HOWTO, class_="howto")]
    groups = warning_groups(exp)
    if groups:
        parts.append(warnings_html(groups))
    forest = [f for s in sections if s.key == VERDICT for f in s.figures]
    if forest:
        parts += ([] if lines else ['<section id="verdict">']) + [tag("h3", "Every paired difference"), *map(_img_html, forest),
                                                                    tag("p", FOREST_HOWTO, class_="howto")]
    if lines or forest:
        parts.append("</section>")
    return parts


def _selection_html(exp: Experiment) -> list[str]:
    """The selection table, the candidates of the methods this experiment ran only, and the picks."""
    methods = run_methods(exp)  # a run's method, without its seed
    sel = [r for r in best_rows(exp.selection) if r["method"] in methods]
    if not sel:
        return []
    return [tag("h3", "Recipe selection on the validation split"),
            *(tag("p", line, class_="note") for line in family_lines(exp.selection)),
            simple_table_html(["candidate", "recipe", "best step (KL)", "val teacher-KL", "val good-behaviour",
                               "famval good-behaviour", "best family score (step)", "eligible steps"],
                              [[r["id"], r["recipe"], str(r["step"]), f"{r['val_teacher_kl']:.3f}", f"{r['val_good']:.3f}",
                                fmt_value(r["famval_good"]), r["family_score"], r["eligible_steps"]] for r in sel], "wrap"),
            tag("h3", "Each rule's pick, side by side"), simple_table_html(*picks_table(exp.selection, methods), "wrap"),
            *(tag("p", line, class_="note") for line in chosen_lines(exp.selection, methods))]


def render_html(exp: Experiment, table: ResultsTable, sections: Sequence[Section], generated: str,
                paired: Paired | None = None, ablation: Ablation | None = None,
                links: Mapping[tuple[str, str], str] | None = None,
                differences: Sequence[PairedDifference] | None = None) -> str:
    """The whole report as one self-contained HTML document: the answer first (the verdict block from
    ``differences``, :func:`opct.report.paired.paired_differences`'s, the warnings by run, the forest plot),
    then the details (``paired``: :func:`paired_table`'s result, ``ablation``: :func:`ablation_parts`'s;
    computed here when not given; ``links``: the results cells' links to ``samples.html``,
    :func:`opct.report.samples.cell_links`, none when not given)."""
    title = f"OPCT experiment report: {exp.name}"
    meta = f"model {exp.model or MISSING} · methods {', '.join(method_label(m) for m in exp.methods) or MISSING} · {exp.root}"
    parts = [tag("h1", title), tag("p", meta, class_="meta"), *_answer_html(exp, sections, differences)]
    parts += [
        '<section id="results">', tag("h2", "Results"), tag("p", HOW_TO_READ["results"], class_="howto"),
        results_table_html(table, links), *_samples_note(links), tag("h3", "The paper's reported numbers, for reference"),
        transposed_tables_html(PAPER_HEADERS, PAPER_ROWS), tag("p", scale_note(exp), class_="note"), "</section>",
    ]
    recipes = recipe_rows(exp.plan, exp.selection)
    if recipes:
        parts += ['<section id="recipes">', tag("h2", "Recipes"), tag("p", RECIPES_HOWTO, class_="howto"),
                  simple_table_html(RECIPE_HEADERS, recipes, "wrap")]
        held = held_back_line(exp.plan)
        parts += [tag("p", held, class_="note")] if held else []
        parts += _selection_html(exp) if exp.selection else []
        parts.append("</section>")
    if profiles := profile_tables(exp.diagnostics):
        parts += ['<section id="profile">', tag("h2", "Off-policy profile"), tag("p", PROFILE_HOWTO, class_="howto")]
        parts += [x for cap, head, rows in profiles for x in (tag("p", cap, class_="note"), simple_table_html(head, rows, "wrap") if rows else "")]
        parts.append("</section>")
    ablation = ablation or ablation_parts(exp)
    if ablation:
        parts += ['<section id="ablation">', tag("h2", "Ablation: each variant minus the reference"),
                  tag("p", ABLATION_HOWTO, class_="howto"), transposed_tables_html(ablation[0], ablation[1])]
        parts += [tag("p", "Largest resolved move per metric: " + "; ".join(ablation[2]), class_="note")] if ablation[2] else []
        parts.append("</section>")
    pheaders, prows = paired or paired_table(exp, table.columns, differences)
    if prows:
        parts += ['<section id="paired">', tag("h2", "Paired differences between methods"), tag("p", PAIRED_HOWTO, class_="howto"),
                  transposed_tables_html(pheaders, prows, "metric")]
    if prows:
        parts.append("</section>")
    if attack_rows(exp):
        parts += ['<section id="attack">', tag("h2", "Adaptive attacker"), tag("p", attack_howto(exp), class_="howto"),
                  simple_table_html(ATTACK_HEADERS, attack_rows(exp), "wrap"), "</section>"]
    parts += _figure_sections_html(sections)
    parts += ['<section id="all-metrics">', tag("h2", "All metrics")]
    parts.append(tag("p", "Every metric each eval reported, as fractions (not percent), with 95% intervals and n.", class_="howto"))
    for eval_name in exp.evals():
        rows = all_metrics_rows(exp, eval_name)
        parts.append(f"<details>{tag('summary', eval_name)}{simple_table_html(['metric', *map(method_label, exp.methods)], rows, 'wrap')}</details>")
    parts += ["</section>", '<section id="experiment">', tag("h2", "Experiment"), _versions_html(exp.manifest)]
    parts += [_json_block(exp.layout.plan.name, exp.plan), _json_block(exp.layout.manifest.name, exp.manifest), "</section>"]
    parts.append(tag("footer", f"Generated by opct.report on {generated}."))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"{tag('title', title)}\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n" + "\n".join(parts) + "\n</main>\n</body>\n</html>\n"
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
