"""The forest plot: every paired difference of the report with its 95% interval, the figure a paper would show.

One small panel per results column (its own scale: points for rates, the score's units otherwise), one
row per pair of methods (OPCT − BCT first and in OPCT's colour), a line at 0, and, for OPCT − BCT, a
mark on the side of 0 the paper claims; for a non-inferiority claim (capability), a dashed line at the
margin −m and an arrow right of it (:func:`_margin_mark`). The panels sit two to a row, so the figure keeps to the
report's column (:data:`opct.report.figure_style.MAX_WIDTH_IN`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib
from matplotlib.figure import Figure

from opct.report.figure_style import (
    MAX_WIDTH_IN,
    STYLE,
    SUPTITLE_PT,
    TICK_PT,
    TITLE_PT,
    method_colour,
    new_figure,
    row_chunks,
    wrap,
)
from opct.report.paired import PairedDifference
from opct.report.pooled import NO_WORSE, NONINFERIORITY_MARGIN, PAPER_PAIR, paper_direction

#: Panels per row of the forest plot.
PANELS_PER_ROW = 2
#: The colour of a pair other than OPCT − BCT.
OTHER_PAIR = "#555555"


#: What the mark of a non-inferiority claim says, beside the dashed line at −m (see :func:`_margin_mark`).
MARGIN_LABEL = "no worse than −{m:g} →"


def _margin_mark(ax: object, x: float, row: int) -> None:
    """A non-inferiority claim's mark: a dashed line at the margin ``x`` (−m, in the panel's units) and an arrow
    from it to the right, the side the claim "OPCT no worse than BCT within m" needs the interval's lower end on."""
    colour = method_colour(PAPER_PAIR[0])
    low, high = ax.get_xlim()
    pad = 0.08 * (high - low)
    ax.set_xlim(min(low, x - pad), high)
    ax.axvline(x, color=colour, linewidth=0.9, linestyle="--")
    ax.annotate(MARGIN_LABEL.format(m=abs(x)), xy=(x, row), xycoords="data", ha="left", va="bottom",
                fontsize=TICK_PT, color=colour, xytext=(4, 6), textcoords="offset points")


def _panel(ax: object, diffs: Sequence[PairedDifference]) -> None:
    """One results column's differences, one row each from the top."""
    scale = 100.0 if diffs[0].column.percent else 1.0
    labels = [d.label for d in diffs]
    for y, d in enumerate(diffs):
        est = d.estimate
        colour = method_colour(PAPER_PAIR[0]) if (d.a, d.b) == PAPER_PAIR else OTHER_PAIR
        if est is None or math.isnan(est.value):
            ax.text(0.5, y, "not measured", ha="center", va="center", fontsize=TICK_PT, color=OTHER_PAIR,
                    transform=ax.get_yaxis_transform())
            continue
        lo, hi = (est.value - est.ci_low) * scale, (est.ci_high - est.value) * scale
        ax.errorbar([est.value * scale], [y], xerr=[[max(0.0, lo)], [max(0.0, hi)]], fmt="o", color=colour,
                    ms=5, capsize=3, elinewidth=1.4, mfc="white" if d.incomplete else colour)
    low, high = ax.get_xlim()
    pad = 0.08 * (high - low)
    ax.set_xlim(min(low, -pad), max(high, pad))  # 0 is always inside, clear of the frame
    ax.axvline(0, color="#222222", linewidth=0.9)
    ax.set_yticks(range(len(diffs)), labels)
    ax.set_ylim(len(diffs) - 0.5, -0.5)
    direction = paper_direction(diffs[0].column.key)
    paper_row = next((y for y, d in enumerate(diffs) if (d.a, d.b) == PAPER_PAIR), None)
    if direction and direction[0] == NO_WORSE and paper_row is not None:
        _margin_mark(ax, -NONINFERIORITY_MARGIN * scale, paper_row)
    elif direction and paper_row is not None:
        ax.annotate("paper →" if direction[0] == "higher" else "← paper", xy=(1.0 if direction[0] == "higher" else 0.0, paper_row),
                    xycoords=("axes fraction", "data"), ha="right" if direction[0] == "higher" else "left", va="bottom",
                    fontsize=TICK_PT, color=method_colour(PAPER_PAIR[0]), xytext=(-4 if direction[0] == "higher" else 4, 6),
                    textcoords="offset points")
    ax.grid(axis="x", alpha=0.3)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("difference, points" if diffs[0].column.percent else "difference")


def plot_forest(differences: Sequence[PairedDifference]) -> Figure | None:
    """Every paired difference (:func:`opct.report.paired.paired_differences`) with its interval, one panel per
    results column; None when there is none. A hollow point: one side of the difference is INCOMPLETE."""
    by_column: dict[str, list[PairedDifference]] = {}
    for d in differences:
        by_column.setdefault(d.column.key, []).append(d)
    for diffs in by_column.values():
        diffs.sort(key=lambda d: (d.a, d.b) != PAPER_PAIR)  # OPCT − BCT first; the rest keep their order
    panels = [diffs for diffs in by_column.values() if any(d.estimate is not None for d in diffs)]
    if not panels:
        return None
    cols = min(PANELS_PER_ROW, len(panels))
    rows = row_chunks(len(panels), cols)
    panel_in = (MAX_WIDTH_IN - 0.2) / cols
    pairs = max(len(p) for p in panels)
    height = 0.9 + 0.32 * pairs  # a panel: its title, its rows and its x axis
    with matplotlib.rc_context(STYLE):
        fig = new_figure((panel_in * cols, height * len(rows) + 0.5))
        axes = fig.subplots(len(rows), cols, squeeze=False)
        for ax in axes.flat[len(panels):]:
            ax.set_visible(False)
        for ax, diffs in zip(axes.flat, panels, strict=False):
            _panel(ax, diffs)
            ax.set_title(wrap(diffs[0].column.header, panel_in - 1.6, TITLE_PT), fontsize=TITLE_PT)
        title = "Paired differences with 95% intervals (hollow: INCOMPLETE; paper: the side it claims for OPCT − BCT; dashed: its no-worse margin)"
        fig.suptitle(wrap(title, panel_in * cols - 0.4, SUPTITLE_PT, bold=True), fontweight="bold")
    return fig
