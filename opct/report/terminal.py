"""The experiment's tables for the terminal, as rich Tables that fit an 80-column window.

``report.md`` / ``report.html`` keep the paper's layout (one row per method, one column per metric);
that is ~250 characters wide, so the terminal gets it transposed: one row per metric, one column per
method (``metric | base | BCT | OPCT``), each cell's value, interval and n on lines of their own; the
paired differences likewise (``metric | OPCT − BCT | OPCT − base | BCT − base``), and the paper's
numbers (``paper | base | SFT (≈ BCT) | OPCT``). A cell's lines break only at spaces, never inside a
number; when the columns of one table cannot all fit beside a readable metric column, the table is
split into several with the metric column repeated. A registered report section
(:mod:`opct.report.section`) with a ``terminal(data)`` adds its lines after them. The output ends with the verdict block, one plain
line per metric (:func:`verdict_renderables`), as report.html begins with it.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from opct.report.ablation import ablation_rows, is_ablation
from opct.report.load import load_experiment
from opct.report.paired import paired_differences, paired_parts
from opct.report.pooled import difference_parts
from opct.report.section import ReportInputs, ordered_sections
from opct.report.selection import recipe_rows
from opct.report.table import (
    MISSING,
    PAPER_HEADERS,
    PAPER_ROWS,
    ResultsTable,
    build_table,
    method_label,
    metric_parts,
    scale_note,
)
from opct.report.verdict import verdict_lines
from opct.runs.experiment_layout import ExperimentLayout

#: The width the tables are made to fit (a terminal's default).
WIDTH = 80
#: The narrowest the metric-name column may get before a table is split into several.
MIN_LABEL_WIDTH = 18
#: A cell's lines up to this long are kept whole (a value, an interval); longer ones wrap at spaces.
KEEP_WHOLE = 16
#: Box-drawing and padding characters per column (``│ `` + `` ``), and the table's closing ``│``.
_PER_COLUMN, _EDGE = 3, 1

Cell = tuple[str, ...]


def _cell_width(cells: Sequence[Cell], header: str) -> int:
    """The width a method column needs: its longest line of up to :data:`KEEP_WHOLE` characters, and its
    longest word, so that no number is broken."""
    lines = [part for cell in cells for part in cell]
    words = [w for text in [*lines, header] for w in text.split()]
    return max([cell_len(line) for line in lines if cell_len(line) <= KEEP_WHOLE] + [cell_len(w) for w in words] + [1])


def _chunks(widths: Sequence[int], label_width: int, width: int) -> list[list[int]]:
    """Indices of the method columns per table: as many as fit beside a label column of ``label_width``."""
    out: list[list[int]] = [[]]
    used = _EDGE + _PER_COLUMN + label_width
    for i, w in enumerate(widths):
        if out[-1] and used + _PER_COLUMN + w > width:
            out.append([])
            used = _EDGE + _PER_COLUMN + label_width
        out[-1].append(i)
        used += _PER_COLUMN + w
    return out


def transposed_tables(title: str, corner: str, labels: Sequence[str], headers: Sequence[str],
                      cells: Sequence[Sequence[Cell]], width: int = WIDTH, justify: str = "right") -> list[Table]:
    """Tables with one row per ``labels[i]`` and one column per ``headers[j]``; ``cells[i][j]`` are the
    lines of a cell. Method columns get the width of their longest number; the label column wraps in
    what is left, and the columns are split over several tables when fewer than
    :data:`MIN_LABEL_WIDTH` characters would be left."""
    widths = [_cell_width([row[j] for row in cells], headers[j]) for j in range(len(headers))]
    label_width = max([MIN_LABEL_WIDTH, *(cell_len(w) for text in [corner, *labels] for w in text.split())])
    tables = []
    for k, chunk in enumerate(_chunks(widths, label_width, width)):
        table = Table(title=Text(title) if k == 0 else None, title_justify="left", box=box.SQUARE, show_lines=True,
                      header_style="bold", title_style="bold")
        table.add_column(Text(corner), overflow="fold", min_width=label_width)
        for j in chunk:
            table.add_column(Text(headers[j]), width=widths[j], justify=justify, overflow="fold")  # type: ignore[arg-type]
        for label, row in zip(labels, cells, strict=True):  # Text: a "[...]" in a cell is never read as markup
            table.add_row(Text(label), *(Text("\n".join(p for p in row[j] if p)) for j in chunk))
        tables.append(table)
    return tables


def _metric_cell(table: ResultsTable, method: str, column_index: int) -> Cell:
    """``("41.0%", "[35.9, 46.1]", "(n=360)")`` (an ``INCOMPLETE`` flag on a line of its own), or ``("—",)``."""
    column = table.columns[column_index]
    metric = table.metrics[(method, column.key)]
    if metric is None:
        return (table.missing(method, column),)
    value, interval, n = metric_parts(metric, percent=column.percent)
    flag = "INCOMPLETE" if n.endswith("INCOMPLETE") else ""
    return value, interval, n.removesuffix("INCOMPLETE").strip(), flag


def results_renderables(exp_dir: str | Path, width: int = WIDTH) -> list[RenderableType]:
    """What ``opct run`` / ``opct demo`` / ``opct report`` print at the end: the results, the paired
    differences between methods, the paper's numbers and how to compare them, each fitting ``width``, what
    a registered report section adds to the terminal (:func:`section_renderables`), then the verdict block
    (OPCT − BCT per metric against the paper), when the experiment trained both."""
    exp = load_experiment(exp_dir)
    table = build_table(exp)
    out: list[RenderableType] = [Text(f"{exp.name} ({exp.model or 'model unknown'})", style="bold")]

    for key, lr, steps, pps, loss, samples, chosen in recipe_rows(exp.plan, exp.selection):
        detail = f"lr {lr}, {steps} steps x {pps} pairs" + (f", {loss} loss, n/T {samples}" if loss != "—" else "")
        out.append(Text(f"recipe {key}: {detail} (chosen by {chosen})"))

    if is_ablation(exp):  # one column per variant, pooled over its seeds; every run's numbers: report.md
        rows = [r for r in ablation_rows(exp) if r.differences]
        keys = list(dict.fromkeys(d.column.key for r in rows for d in r.differences))
        cells = {(r.variant, d.column.key): tuple(p for p in difference_parts(d) if p) for r in rows for d in r.differences}
        headers = {d.column.key: d.column.header for r in rows for d in r.differences}
        out += transposed_tables(
            f"Ablation: variant − {exp.plan['reference']} (pooled over seeds; 95% intervals)", "metric",
            [headers[k] for k in keys], [r.variant for r in rows],
            [[cells.get((r.variant, k), (MISSING,)) for r in rows] for k in keys], width)
        out.append(Text(f"Every run's own numbers, and the compute per variant: {ExperimentLayout(Path(exp_dir)).report_md}"))
        return out + section_renderables(ReportInputs(exp, table))
    out += transposed_tables(
        "Results (95% intervals; n units)", "metric", [c.header for c in table.columns],
        [method_label(m) for m in table.methods],
        [[_metric_cell(table, m, i) for m in table.methods] for i in range(len(table.columns))], width)
    differences = paired_differences(exp, table.columns)
    cols, rows = paired_parts(exp, table.columns, differences)
    shown = [i for i in range(len(cols)) if any(cells[i] != (MISSING,) for _, cells in rows)]
    if shown:  # a metric with no difference between any two methods is left out
        out += transposed_tables(
            "Paired differences on the same units (95% paired cluster bootstrap; k units)", "metric",
            [cols[i].header for i in shown], [label for label, _ in rows],
            [[cells[i] for _, cells in rows] for i in shown], width)
    paper = [[(row[i],) for row in PAPER_ROWS] for i in range(1, len(PAPER_HEADERS))]
    out += transposed_tables(PAPER_HEADERS[0], "metric", PAPER_HEADERS[1:], [row[0] for row in PAPER_ROWS], paper, width,
                             justify="left")
    out.append(Text(scale_note(exp)))
    out += section_renderables(ReportInputs(exp, table, differences))
    return out + verdict_renderables([v.sentence() for v in verdict_lines(differences)], width)


def section_renderables(report: ReportInputs) -> list[RenderableType]:
    """What the registered report sections that have a ``terminal(data)`` add to the summary, in their order
    (the built-in sections have none: the tables above are the terminal's own)."""
    out: list[RenderableType] = []
    for section in ordered_sections():
        terminal = getattr(section, "terminal", None)
        if terminal is not None and (data := section.data(report)) is not None:
            out += terminal(data)
    return out


#: The verdict block's title in the terminal (report.html's words).
VERDICT_TITLE = "Verdict: OPCT − BCT against the paper"


def verdict_renderables(sentences: Sequence[str], width: int = WIDTH) -> list[RenderableType]:
    """The verdict block: its title, then one line per metric (``sentences``, each
    :meth:`opct.report.verdict.VerdictLine.sentence`'s form) wrapped to ``width`` at spaces outside an
    interval (``[-17.5, -6.4]`` is kept whole), printed as plain text (never read as markup); none without lines."""
    if not sentences:
        return []
    keep = "\x00"  # a space inside brackets, kept from wrapping
    lines = []
    for sentence in sentences:
        joined = re.sub(r"\[[^\]]*\]", lambda m: m[0].replace(" ", keep), f"- {sentence}")
        lines += [line.replace(keep, " ") for line in textwrap.wrap(joined, width, subsequent_indent="  ",
                                                                    break_on_hyphens=False, break_long_words=False)]
    return [Text(""), Text(VERDICT_TITLE, style="bold"), *(Text(line) for line in lines)]


def results_group(exp_dir: str | Path, width: int = WIDTH) -> Group:
    """:func:`results_renderables` as one renderable for ``console.print``."""
    return Group(*results_renderables(exp_dir, width))
