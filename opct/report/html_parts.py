"""The report page's pieces as data for its template (``templates/report.html.jinja``): tables that fit the
page, the results cells, the verdict lines and the figures.

No HTML is written here; the template writes it, autoescaped. A table with many columns is transposed
(its rows become columns) and split into tables of at most :data:`MAX_COLUMNS` value columns, so that none
is wider than the report's column at 1300 pixels (the browser test in ``tests/test_report_layout.py``
checks that no table scrolls sideways).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opct.report.metric import Metric
from opct.report.table import MISSING, ResultsTable, method_label, metric_parts
from opct.report.verdict import HOLDS_CLASS, VerdictLine

if TYPE_CHECKING:  # figures.py loads matplotlib; only the saved files' records are read here
    from opct.report.figures import FigureFile

#: The most value columns one table of the report has (beside its label column).
MAX_COLUMNS = 5

#: A table for the template's ``table`` macro: headers, rows (each row's first cell its label) and a class.
Table = dict[str, Any]


def _chunks(n: int, size: int = MAX_COLUMNS) -> list[range]:
    rows = max(1, -(-n // size))
    step = -(-n // rows) if n else 1
    return [range(i, min(n, i + step)) for i in range(0, n, step)] or [range(0)]


def simple_table(headers: Sequence[str], rows: Sequence[Sequence[str]], class_: str = "") -> Table:
    """A table of plain strings, the first cell of each row its label."""
    return {"headers": list(headers), "rows": [list(r) for r in rows], "class": class_}


def metric_cell(metric: Metric | None, percent: bool, missing: str = MISSING, href: str | None = None) -> dict[str, Any]:
    """A results cell: its value, interval and n (or what stands for a missing metric); with ``href`` its
    content links there (the cell's samples on ``samples.html``)."""
    if metric is None:
        return {"class": "missing", "missing": missing, "href": href}
    value, ci, n = metric_parts(metric, percent)
    return {"class": "cell", "missing": None, "value": value, "parts": [(p, c) for p, c in ((ci, "ci"), (n, "n")) if p],
            "href": href}


def results_tables(table: ResultsTable, links: Mapping[tuple[str, str], str] | None = None) -> list[dict[str, Any]]:
    """The results, one row per metric and one column per method (at most :data:`MAX_COLUMNS` methods a
    table); ``links``: each cell's link by (method, column key), :func:`opct.report.samples.cell_links`.
    The first table's id is ``results-table``."""
    links = links or {}
    out = []
    for n, chunk in enumerate(_chunks(len(table.methods))):
        methods = [table.methods[i] for i in chunk]
        rows = [{"header": c.header, "cells": [metric_cell(table.metrics[(m, c.key)], c.percent, table.missing(m, c),
                                                          links.get((m, c.key))) for m in methods]}
                for c in table.columns]
        out.append({"id": "results-table" if n == 0 else f"results-table-{n + 1}",
                    "headers": ["metric", *(method_label(m) for m in methods)], "rows": rows})
    return out


def transposed_tables(headers: Sequence[str], rows: Sequence[Sequence[str]], corner: str = "") -> list[Table]:
    """A wide table turned on its side: each row becomes a column (at most :data:`MAX_COLUMNS` a table,
    further ones in further tables) and each header a row's label; ``corner``: the label column's head."""
    if not rows:
        return []
    out = []
    for chunk in _chunks(len(rows)):
        picked = [rows[i] for i in chunk]
        new_rows = [[h, *(r[i] for r in picked)] for i, h in enumerate(headers) if i > 0]
        out.append(simple_table([corner or headers[0], *(r[0] for r in picked)], new_rows, "wrap"))
    return out


def verdict_items(lines: Sequence[VerdictLine]) -> list[dict[str, str | None]]:
    """The verdict block: one item per metric, the paper's side, OPCT − BCT with its interval, the verdict."""
    return [{"class": HOLDS_CLASS.get(line.verdict, "open"), "header": line.header,
             "side": line.side_text if line.side else None, "difference": line.difference_text, "verdict": line.verdict}
            for line in lines]


def figure_item(fig: FigureFile) -> dict[str, str]:
    """A figure inlined as a data URI, its alt text and its smallest text's size (for the layout test)."""
    return {"data": base64.b64encode(fig.path.read_bytes()).decode("ascii"), "alt": fig.name.replace("_", " "),
            "text_px": f"{fig.min_text_px:.1f}"}
