"""The report's HTML pieces: escaped tags, tables that fit the page, the verdict block and the warnings.

Every piece of text is escaped; the only markup is this module's own. A table with many columns is
transposed (its rows become columns) and split into tables of at most :data:`MAX_COLUMNS` value
columns, so that none is wider than the report's column at 1300 pixels (the browser test in
``tests/test_report_layout.py`` checks that no table scrolls sideways).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from opct.report.load import Metric
from opct.report.table import MISSING, ResultsTable, method_label, metric_parts
from opct.report.verdict import HOLDS_CLASS, VerdictLine

#: The most value columns one table of the report has (beside its label column).
MAX_COLUMNS = 5

#: The report's style sheet.
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
td.cell .v { display: block; font-weight: 600; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.cell .ci, td.cell .n { color: var(--muted); font-size: 12.5px; font-variant-numeric: tabular-nums; }
td.cell .ci { white-space: nowrap; } td.cell .n { display: block; min-width: 9em; }
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
details.warn { background: #fff4e5; border-color: #e69f00; margin: 12px 0; }
details.warn h4 { margin: 8px 0 2px; font-size: 14px; }
details.warn ul { margin: 2px 0; padding-left: 20px; font-size: 13.5px; }
table.wrap td, table.wrap th { overflow-wrap: anywhere; }
ul.verdicts { list-style: none; padding: 0; margin: 8px 0; }
ul.verdicts li { padding: 5px 10px; margin: 3px 0; border-left: 5px solid #9aa0a6; background: var(--band); font-size: 14.5px; }
ul.verdicts li.holds { border-color: #009E73; } ul.verdicts li.reversed { border-color: #D55E00; }
ul.verdicts .side, ul.verdicts .diff { color: var(--muted); margin: 0 8px; font-variant-numeric: tabular-nums; }
ul.verdicts .diff { color: var(--fg); }
footer { margin-top: 40px; color: var(--muted); font-size: 12.5px; }
"""


def tag(name: str, text: str, **attrs: str) -> str:
    """``<name attrs>escaped text</name>``; attribute values are escaped too."""
    attr = "".join(f' {k.rstrip("_")}="{escape(v, quote=True)}"' for k, v in attrs.items())
    return f"<{name}{attr}>{escape(text)}</{name}>"


def head(headers: Sequence[str]) -> str:
    """A ``<thead>`` row of ``headers``."""
    return "<thead><tr>" + "".join(tag("th", h) for h in headers) + "</tr></thead>"


def _chunks(n: int, size: int = MAX_COLUMNS) -> list[range]:
    rows = max(1, -(-n // size))
    step = -(-n // rows) if n else 1
    return [range(i, min(n, i + step)) for i in range(0, n, step)] or [range(0)]


def metric_cell(metric: Metric | None, percent: bool, missing: str = MISSING, href: str | None = None) -> str:
    """A results cell; with ``href`` its content links there (the cell's samples on ``samples.html``)."""
    if metric is None:
        inner, class_ = escape(missing), "missing"
    else:
        value, ci, n = metric_parts(metric, percent)
        inner = tag("span", value, class_="v") + "".join(" " + tag("span", p, class_=c) for p, c in ((ci, "ci"), (n, "n")) if p)
        class_ = "cell"
    if href:
        inner = f'<a href="{escape(href, quote=True)}" title="its samples">{inner}</a>'
    return f'<td class="{class_}">{inner}</td>'


def results_table_html(table: ResultsTable, links: Mapping[tuple[str, str], str] | None = None) -> str:
    """The results as HTML, one row per metric and one column per method (at most :data:`MAX_COLUMNS`
    methods a table; cells split into value, interval and n); ``links``: each cell's link by (method,
    column key), :func:`opct.report.samples.cell_links`. The first table's id is ``results-table``."""
    links = links or {}
    out = []
    for n, chunk in enumerate(_chunks(len(table.methods))):
        methods = [table.methods[i] for i in chunk]
        body = []
        for c in table.columns:
            cells = "".join(metric_cell(table.metrics[(m, c.key)], c.percent, table.missing(m, c), links.get((m, c.key)))
                            for m in methods)
            body.append(f"<tr>{tag('th', c.header)}{cells}</tr>")
        id_ = "results-table" if n == 0 else f"results-table-{n + 1}"
        headers = ["metric", *(method_label(m) for m in methods)]
        out.append(f'<div class="scroll"><table class="results" id="{id_}">{head(headers)}<tbody>{"".join(body)}</tbody></table></div>')
    return "".join(out)


def simple_table_html(headers: Sequence[str], rows: Sequence[Sequence[str]], class_: str = "") -> str:
    """A table of plain strings (escaped), the first cell of each row its label."""
    body = "".join("<tr>" + tag("th", r[0]) + "".join(tag("td", c) for c in r[1:]) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="{escape(class_, quote=True)}">{head(headers)}<tbody>{body}</tbody></table></div>'


def transposed_tables_html(headers: Sequence[str], rows: Sequence[Sequence[str]], corner: str = "") -> str:
    """A wide table turned on its side: each row becomes a column (at most :data:`MAX_COLUMNS` a table,
    further ones in further tables) and each header a row's label; ``corner``: the label column's head."""
    if not rows:
        return ""
    out = []
    for chunk in _chunks(len(rows)):
        picked = [rows[i] for i in chunk]
        new_rows = [[h, *(r[i] for r in picked)] for i, h in enumerate(headers) if i > 0]
        out.append(simple_table_html([corner or headers[0], *(r[0] for r in picked)], new_rows, "wrap"))
    return "".join(out)


def verdict_html(lines: Sequence[VerdictLine]) -> str:
    """The verdict block: one line per metric, the paper's side, OPCT − BCT with its interval, the verdict."""
    items = []
    for line in lines:
        cls = HOLDS_CLASS.get(line.verdict, "open")
        side = f'{tag("span", "paper: " + line.side_text, class_="side")} ' if line.side else ""
        items.append(f'<li class="{cls}">{tag("b", line.header)} {side}'
                     f'{tag("span", "OPCT − BCT " + line.difference_text, class_="diff")} '
                     f'{tag("strong", line.verdict, class_="verdict")}</li>')
    return f'<ul class="verdicts">{"".join(items)}</ul>'


def warnings_html(groups: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The warnings, folded, one list per run."""
    count = sum(len(lines) for _, lines in groups)
    body = "".join(f"{tag('h4', run)}<ul>{''.join(tag('li', s) for s in lines)}</ul>" for run, lines in groups)
    return (f'<details class="warn" id="warnings"><summary>{count} warning{"s" if count != 1 else ""}, '
            f"by run</summary>{body}</details>")
