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

from opct.report.ablation import HOWTO as ABLATION_HOWTO
from opct.report.ablation import ablation_rows, ablation_table, is_ablation, largest_moves
from opct.report.figures import FigureFile
from opct.report.load import Experiment, Metric
from opct.report.paired import HOWTO as PAIRED_HOWTO
from opct.report.paired import paired_table
from opct.report.samples import SAMPLES_HTML
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
    metric_parts,
    render_markdown,
    scale_note,
)

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
    from opct.axes import AXES

    sections = [Section(name, axis.title or name.capitalize(), axis.howto) for name, axis in AXES.items()]
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

CSS = """
:root { --fg: #1d1d1f; --muted: #5f6368; --line: #d9dce0; --band: #f5f7fa; --accent: #0072B2; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--fg); background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 16px; margin: 22px 0 6px; }
p.meta { color: var(--muted); margin: 0 0 16px; }
p.howto { background: var(--band); border-left: 4px solid var(--accent); padding: 8px 12px; margin: 8px 0 14px; font-size: 14px; }
p.note { font-size: 13.5px; color: var(--muted); font-style: italic; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13.5px; margin: 6px 0 10px; }
th, td { border: 1px solid var(--line); padding: 6px 9px; text-align: left; vertical-align: top; }
thead th { background: #eef1f5; font-weight: 600; }
tbody tr:nth-child(even) { background: #fafbfc; }
td.cell { white-space: nowrap; }
td.cell .v { display: block; font-weight: 600; font-variant-numeric: tabular-nums; }
td.cell .ci, td.cell .n { color: var(--muted); font-size: 12.5px; font-variant-numeric: tabular-nums; }
td.missing { color: #9aa0a6; text-align: center; }
td a { color: inherit; text-decoration: none; }
td.cell a .v { color: var(--accent); }
td a:hover { text-decoration: underline; }
table.paper { font-style: italic; }
table.paper thead th { background: #f3efe6; }
figure { margin: 14px 0 22px; }
figure img { max-width: 100%; height: auto; display: block; border: 1px solid var(--line); border-radius: 4px; }
figcaption { font-size: 12.5px; color: var(--muted); margin-top: 4px; }
details { margin: 8px 0; border: 1px solid var(--line); border-radius: 4px; padding: 6px 10px; }
summary { cursor: pointer; font-weight: 600; }
pre { background: var(--band); padding: 10px; overflow-x: auto; font-size: 12.5px; }
div.warn { background: #fff4e5; border: 1px solid #e69f00; border-radius: 4px; padding: 6px 12px; margin: 12px 0; }
footer { margin-top: 40px; color: var(--muted); font-size: 12.5px; }
"""


def _tag(name: str, text: str, **attrs: str) -> str:
    """``<name attrs>escaped text</name>``; attribute values are escaped too."""
    attr = "".join(f' {k.rstrip("_")}="{escape(v, quote=True)}"' for k, v in attrs.items())
    return f"<{name}{attr}>{escape(text)}</{name}>"


def _metric_cell(metric: Metric | None, percent: bool, missing: str = MISSING, href: str | None = None) -> str:
    """A results cell; with ``href`` its content links there (the cell's samples on ``samples.html``)."""
    if metric is None:
        inner, class_ = escape(missing), "missing"
    else:
        value, ci, n = metric_parts(metric, percent)
        inner = _tag("span", value, class_="v") + "".join(" " + _tag("span", p, class_=c) for p, c in ((ci, "ci"), (n, "n")) if p)
        class_ = "cell"
    if href:
        inner = f'<a href="{escape(href, quote=True)}" title="its samples">{inner}</a>'
    return f'<td class="{class_}">{inner}</td>'


def _head(headers: Sequence[str]) -> str:
    return "<thead><tr>" + "".join(_tag("th", h) for h in headers) + "</tr></thead>"


def results_table_html(table: ResultsTable, links: Mapping[tuple[str, str], str] | None = None) -> str:
    """The paper-style table as an HTML table (cells split into value, interval and n); ``links``: each
    cell's link by (method, column key), :func:`opct.report.samples.cell_links`."""
    links = links or {}
    body = []
    for m in table.methods:
        cells = "".join(_metric_cell(table.metrics[(m, c.key)], c.percent, table.missing(m, c), links.get((m, c.key)))
                        for c in table.columns)
        body.append(f"<tr>{_tag('th', method_label(m))}{cells}</tr>")
    return f'<div class="scroll"><table class="results" id="results-table">{_head(table.headers)}<tbody>{"".join(body)}</tbody></table></div>'


def simple_table_html(headers: Sequence[str], rows: Sequence[Sequence[str]], class_: str = "") -> str:
    """A table of plain strings (escaped)."""
    body = "".join("<tr>" + _tag("th", r[0]) + "".join(_tag("td", c) for c in r[1:]) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="{escape(class_, quote=True)}">{_head(headers)}<tbody>{body}</tbody></table></div>'


def _samples_note(links: Mapping[tuple[str, str], str] | None) -> list[str]:
    if not links:
        return []
    link = f'<a href="{SAMPLES_HTML}">{SAMPLES_HTML}</a>'
    return [f'<p class="note">Each cell links to its prompts, with every method’s answers, on {link}.</p>']


def _img_html(fig: FigureFile) -> str:
    data = base64.b64encode(fig.path.read_bytes()).decode("ascii")
    alt = _figure_alt(fig)
    return f'<figure><img src="data:image/png;base64,{data}" alt="{escape(alt, quote=True)}">{_tag("figcaption", f"figures/{fig.path.name}")}</figure>'


def _json_block(title: str, data: dict[str, Any]) -> str:
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    return f"<details>{_tag('summary', title)}{_tag('pre', text)}</details>"


def _versions_html(manifest: dict[str, Any]) -> str:
    versions = manifest.get("versions")
    if not isinstance(versions, dict) or not versions:
        return ""
    rows = [[str(k), str(v)] for k, v in versions.items()]
    return _tag("h3", "Versions") + simple_table_html(["package", "version"], rows)


Paired = tuple[list[str], list[list[str]]]
#: The ablation table (:func:`opct.report.ablation.ablation_table`) and its largest moves.
Ablation = tuple[list[str], list[list[str]], list[str]]


def ablation_parts(exp: Experiment) -> Ablation | None:
    """The ablation section's table and largest moves, or None when the experiment is not an ablation."""
    if not is_ablation(exp):
        return None
    rows = ablation_rows(exp)
    return (*ablation_table(rows), largest_moves(rows))


def render_html(exp: Experiment, table: ResultsTable, sections: Sequence[Section], generated: str,
                paired: Paired | None = None, ablation: Ablation | None = None,
                links: Mapping[tuple[str, str], str] | None = None) -> str:
    """The whole report as one self-contained HTML document (``paired``: :func:`paired_table`'s result,
    ``ablation``: :func:`ablation_parts`'s; computed here when not given; ``links``: the results cells'
    links to ``samples.html``, :func:`opct.report.samples.cell_links`, none when not given)."""
    title = f"OPCT experiment report: {exp.name}"
    meta = f"model {exp.model or MISSING} · methods {', '.join(method_label(m) for m in exp.methods) or MISSING} · {exp.root}"
    parts = [_tag("h1", title), _tag("p", meta, class_="meta")]
    if exp.warnings:
        items = "".join(_tag("li", w) for w in exp.warnings)
        parts.append(f'<div class="warn"><strong>Warnings</strong><ul>{items}</ul></div>')
    parts += [
        '<section id="results">', _tag("h2", "Results"), _tag("p", HOW_TO_READ["results"], class_="howto"),
        results_table_html(table, links), *_samples_note(links), _tag("h3", "The paper's reported numbers, for reference"),
        simple_table_html(PAPER_HEADERS, PAPER_ROWS, "paper"), _tag("p", scale_note(exp), class_="note"), "</section>",
    ]
    recipes = recipe_rows(exp.plan, exp.selection)
    if recipes:
        parts += ['<section id="recipes">', _tag("h2", "Recipes"), _tag("p", RECIPES_HOWTO, class_="howto"),
                  simple_table_html(RECIPE_HEADERS, recipes)]
        held = held_back_line(exp.plan)
        parts += [_tag("p", held, class_="note")] if held else []
        if exp.selection:
            sel = best_rows(exp.selection)
            parts += [_tag("h3", "Recipe selection on the validation split"),
                      *[_tag("p", line, class_="note") for line in family_lines(exp.selection)],
                      simple_table_html(["candidate", "recipe", "best step (KL)", "val teacher-KL", "val good-behaviour",
                                         "famval good-behaviour", "best family score (step)", "eligible steps"],
                                        [[r["id"], r["recipe"], str(r["step"]), f"{r['val_teacher_kl']:.3f}", f"{r['val_good']:.3f}",
                                          fmt_value(r["famval_good"]), r["family_score"], r["eligible_steps"]] for r in sel]),
                      _tag("h3", "Each rule's pick, side by side"), simple_table_html(*picks_table(exp.selection))]
            parts += [_tag("p", line, class_="note") for line in chosen_lines(exp.selection)]
        parts.append("</section>")
    if profiles := profile_tables(exp.diagnostics):
        parts += ['<section id="profile">', _tag("h2", "Off-policy profile"), _tag("p", PROFILE_HOWTO, class_="howto")]
        parts += [x for cap, head, rows in profiles for x in (_tag("p", cap, class_="note"), simple_table_html(head, rows) if rows else "")]
        parts.append("</section>")
    ablation = ablation or ablation_parts(exp)
    if ablation:
        parts += ['<section id="ablation">', _tag("h2", "Ablation: each variant minus the reference"),
                  _tag("p", ABLATION_HOWTO, class_="howto"), simple_table_html(ablation[0], ablation[1])]
        parts += [_tag("p", "Largest resolved move per metric: " + "; ".join(ablation[2]), class_="note")] if ablation[2] else []
        parts.append("</section>")
    pheaders, prows = paired or paired_table(exp, table.columns)
    if prows:
        parts += ['<section id="paired">', _tag("h2", "Paired differences between methods"), _tag("p", PAIRED_HOWTO, class_="howto"),
                  simple_table_html(pheaders, prows), "</section>"]
    if attack_rows(exp):
        parts += ['<section id="attack">', _tag("h2", "Adaptive attacker"), _tag("p", attack_howto(exp), class_="howto"),
                  simple_table_html(ATTACK_HEADERS, attack_rows(exp)), "</section>"]
    for s in sections:
        if not s.figures:
            continue
        parts += [f'<section id="{escape(s.key, quote=True)}">', _tag("h2", s.title), _tag("p", s.howto, class_="howto")]
        parts += [_img_html(f) for f in s.figures]
        parts.append("</section>")
    parts += ['<section id="all-metrics">', _tag("h2", "All metrics")]
    parts.append(_tag("p", "Every metric each eval reported, as fractions (not percent), with 95% intervals and n.", class_="howto"))
    for eval_name in exp.evals():
        rows = all_metrics_rows(exp, eval_name)
        parts.append(f"<details>{_tag('summary', eval_name)}{simple_table_html(['metric', *map(method_label, exp.methods)], rows)}</details>")
    parts += ["</section>", '<section id="experiment">', _tag("h2", "Experiment"), _versions_html(exp.manifest)]
    parts += [_json_block("plan.json", exp.plan), _json_block("manifest.json", exp.manifest), "</section>"]
    parts.append(_tag("footer", f"Generated by opct.report on {generated}."))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"{_tag('title', title)}\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n" + "\n".join(parts) + "\n</main>\n</body>\n</html>\n"
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
            out += [selection_markdown(exp.selection).replace("## Recipe selection", "### Recipe selection"), ""]
    if profiles := profile_tables(exp.diagnostics):
        out += ["## Off-policy profile", "", PROFILE_HOWTO, ""]
        out += [x for cap, head, rows in profiles for x in (f"*{cap}*", "", render_markdown(head, rows) if rows else "", "")]
    return out


def render_md(exp: Experiment, table: ResultsTable, sections: Sequence[Section], generated: str, figures_dir: str = "figures",
              paired: Paired | None = None, ablation: Ablation | None = None, samples: bool = False) -> str:
    """The report as Markdown: the tables, how-to-read notes and links to the PNGs under ``figures_dir``
    (``samples``: say that ``samples.html`` holds every prompt and answer)."""
    out = [f"# OPCT experiment report: {exp.name}", "",
           f"Model `{exp.model or MISSING}`; methods {', '.join(method_label(m) for m in exp.methods) or MISSING}. Generated {generated}.", ""]
    if exp.warnings:
        out += ["**Warnings**", "", *(f"- {w}" for w in exp.warnings), ""]
    out += ["## Results", "", HOW_TO_READ["results"], "", render_markdown(table.headers, table.rows()), "",
            *([f"Every prompt, with each method's answer side by side: [{SAMPLES_HTML}]({SAMPLES_HTML}).", ""] if samples else []),
            "### The paper's reported numbers, for reference", "", render_markdown(PAPER_HEADERS, PAPER_ROWS), "", f"*{scale_note(exp)}*", ""]
    out += recipes_md(exp)
    ablation = ablation or ablation_parts(exp)
    if ablation:
        out += ["## Ablation: each variant minus the reference", "", ABLATION_HOWTO, "", render_markdown(ablation[0], ablation[1]), ""]
        out += ["Largest resolved move per metric:", "", *(f"- {line}" for line in ablation[2]), ""] if ablation[2] else []
    pheaders, prows = paired or paired_table(exp, table.columns)
    if prows:
        out += ["## Paired differences between methods", "", PAIRED_HOWTO, "", render_markdown(pheaders, prows), ""]
    if attack_rows(exp):
        out += ["## Adaptive attacker", "", attack_howto(exp), "", render_markdown(ATTACK_HEADERS, attack_rows(exp)), ""]
    for s in sections:
        if not s.figures:
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
