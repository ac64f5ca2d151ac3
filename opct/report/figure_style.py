"""What every report figure shares: the style, the colours, a figure on the Agg canvas, text wrapped to its room.

Figures fit the report's column: none is wider than :data:`MAX_WIDTH_IN` inches (at the report's 110 dpi,
narrower than the page's 1116-pixel column), so the browser never shrinks one, and no text is smaller
than :data:`MIN_FONT_PT` points (10.7 pixels at 110 dpi). A figure with more groups than fit in one row
wraps them into further rows of panels.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from opct.methods import METHODS

#: The untrained model's key in an experiment, and its colour (it is no method, so it has no card).
BASE, BASE_COLOUR = "base", "#6E6E6E"
OTHER_COLOURS = ("#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")
SPLIT_STYLE = {"train": {"hatch": "///", "alpha": 0.55}, "heldout": {"hatch": "", "alpha": 1.0}, "adaptive": {"hatch": "..", "alpha": 0.8}}
SPLIT_LABEL = {"train": "train {unit}", "heldout": "held-out {unit}", "adaptive": "adaptive attacker"}
STYLE = {
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8, "axes.spines.top": False,
    "axes.spines.right": False, "axes.grid": True, "axes.grid.axis": "y", "grid.alpha": 0.3, "axes.axisbelow": True, "hatch.linewidth": 0.6,
}
#: Font sizes (points) of STYLE's tick labels, panel titles, suptitle and legends, for wrapping text to its room.
TICK_PT, TITLE_PT, SUPTITLE_PT, LEGEND_PT = 9.0, 10.0, 10.8, 8.0
#: A generous average glyph width of the report's font (DejaVu Sans), in ems; bold text is wider.
CHAR_EM, BOLD_EM = 0.62, 0.72
#: Inches that the y axis's label and tick labels take beside a panel.
Y_AXIS_IN = 1.0
#: The widest a figure may be (inches): 1100 pixels at the report's 110 dpi, inside its 1116-pixel column.
MAX_WIDTH_IN = 10.0
#: The smallest text any figure draws (points).
MIN_FONT_PT = 7.0


def method_colour(method: str) -> str | None:
    """The fixed colour of ``method``: base grey, a registered method's card colour; None for any other key."""
    card = METHODS.card(method)
    return BASE_COLOUR if method == BASE else card.colour if card is not None else None


def method_colours(methods: Sequence[str]) -> dict[str, str]:
    """A stable colour per method: base grey, each registered method its card's colour (BCT orange, OPCT
    blue, ACT green), the others the Okabe-Ito colours that none of those took, in turn."""
    fixed = {m: c for m in methods if (c := method_colour(m)) is not None}
    free = [c for c in OTHER_COLOURS if c not in fixed.values()] or list(OTHER_COLOURS)
    others = iter(free * (1 + len(methods) // len(free)))
    return {m: fixed.get(m) or next(others) for m in methods}


def new_figure(size: tuple[float, float]) -> Figure:
    """A figure of ``size`` inches on the Agg canvas, with constrained layout."""
    fig = Figure(figsize=size, layout="constrained")  # room for every label, legend and title; never "not applied"
    FigureCanvasAgg(fig)
    return fig


def wrap(text: str, inches: float, points: float, bold: bool = False) -> str:
    """``text`` broken into lines no wider than ``inches`` at ``points`` (at spaces and hyphens, inside a
    word only when one word is wider than that)."""
    chars = max(4, int(inches * 72 / (points * (BOLD_EM if bold else CHAR_EM))))
    return "\n".join(textwrap.wrap(text, chars)) or text


def legend_inches(labels: Sequence[str]) -> float:
    """The width of a one-column legend of ``labels`` (handle, padding and the longest label)."""
    return (max(map(len, labels), default=0) * LEGEND_PT * CHAR_EM + 4 * LEGEND_PT) / 72


def side_legend(fig: Figure, handles: Sequence[Any], labels: Sequence[str] | None = None) -> None:
    """One legend column outside the axes, on the figure's right (constrained layout makes room)."""
    if labels is None:
        fig.legend(handles=list(handles), loc="outside right upper", frameon=False)
    else:
        fig.legend(list(handles), list(labels), loc="outside right upper", frameon=False)



def row_chunks(n: int, per_row: int) -> list[range]:
    """``range(n)`` cut into consecutive rows of at most ``per_row`` (at least 1) items, as even as they can be."""
    rows = max(1, -(-n // max(1, per_row)))
    size = -(-n // rows) if n else 0
    return [range(i, min(n, i + size)) for i in range(0, n, size)] if n else [range(0)]
