"""The report's figures (matplotlib's object API on the Agg canvas; pyplot's global state is not used): per-axis bars, the safety curve, capability, training.

Each ``plot_*`` function returns a matplotlib figure, or None when the experiment has nothing to
draw. Methods keep one colour everywhere (Okabe-Ito, colour-blind safe); train-family bars are
hatched and held-out ones solid.

Labels never overlap, whatever the number of methods and the length of their names: figures use
matplotlib's constrained layout, grow with the number of bar groups, wrap tick labels and titles to
the room they have (:func:`_wrap`) and put the legends of bar charts outside the axes, on the right.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.ticker import PercentFormatter

from opct.evals.axis_registry import axes_with
from opct.evals.axis_views import ReportView
from opct.report.experiment import Experiment
from opct.report.figure_style import (
    LEGEND_PT,
    MAX_WIDTH_IN,
    MIN_FONT_PT,
    SPLIT_LABEL,
    SPLIT_STYLE,
    STYLE,
    SUPTITLE_PT,
    TICK_PT,
    TITLE_PT,
    Y_AXIS_IN,
    legend_inches,
    method_colours,
    new_figure,
    row_chunks,
    side_legend,
    wrap,
)
from opct.report.metric import Metric
from opct.report.table import method_label
from opct.report.training_figure import plot_training


@dataclass(frozen=True)
class AxisSpec:
    """What the per-axis figure plots: the eval, its headline metric and how to show it."""

    axis: str
    metric: str
    title: str
    short: str
    percent: bool
    better: str
    #: What the train/held-out split divides: perturbation families, or (awareness) safety facts.
    unit: str = "families"
    #: Also show the adaptive attacker's ``metric`` (dotted bars) beside the static splits.
    adaptive: bool = False

def _group_ticks(ax: Any, labels: Sequence[str], slot_in: float) -> None:
    """One tick per bar group at 0, 1, ..., each label wrapped to its group's width ``slot_in`` (inches)."""
    ax.set_xticks(range(len(labels)), [wrap(label, 0.9 * slot_in, TICK_PT) for label in labels])
    ax.set_xlim(-0.5, len(labels) - 0.5)


def _yerr(metrics: Sequence[Metric | None]) -> list[list[float]]:
    lo = [max(0.0, m.value - m.ci_low) if m and m.has_interval else 0.0 for m in metrics]
    hi = [max(0.0, m.ci_high - m.value) if m and m.has_interval else 0.0 for m in metrics]
    return [lo, hi]


def _bars(ax: Any, x: Sequence[float], metrics: Sequence[Metric | None], width: float, colour: str, split: str, **kw: Any) -> None:
    """Bars with 95% interval whiskers; a missing metric leaves a gap marked "n/a"."""
    values = [m.value if m else 0.0 for m in metrics]
    style = SPLIT_STYLE[split]
    ax.bar(x, values, width, color=colour, alpha=style["alpha"], hatch=style["hatch"], edgecolor="white" if not style["hatch"] else colour,
           linewidth=0.6, yerr=_yerr(metrics), error_kw={"elinewidth": 1, "capsize": 2.5, "ecolor": "#222222"}, **kw)
    for xi, m in zip(x, metrics, strict=True):
        if m is None:
            ax.text(xi, 0.01, "n/a", ha="center", va="bottom", fontsize=MIN_FONT_PT, color="#555555", transform=ax.get_xaxis_transform())


def _format_y(ax: Any, percent: bool, label: str, height_in: float = 2.0) -> None:
    ax.set_ylim(0, 1.05)
    if percent:
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylabel(wrap(label, height_in, TICK_PT))


def _families(exp: Experiment, eval_name: str, metric: str) -> list[str]:
    prefix = f"{metric}/"
    return [k[len(prefix):] for k in exp.metric_keys(eval_name) if k.startswith(prefix)]


def _split_legend(splits: Sequence[str], unit: str) -> list[Patch]:
    return [Patch(facecolor="#BBBBBB", edgecolor="#555555", hatch=SPLIT_STYLE[s]["hatch"], alpha=SPLIT_STYLE[s]["alpha"],
                  label=SPLIT_LABEL[s].format(unit=unit)) for s in splits]


def _method_legend(methods: Sequence[str], colours: dict[str, str]) -> list[Patch]:
    return [Patch(facecolor=colours[m], label=method_label(m)) for m in methods]


def plot_axis(exp: Experiment, spec: AxisSpec) -> Figure | None:
    """Overall train vs held-out (and adaptive-attacker) bars per method, then bars per family: one row of
    panels each, the families over as many rows as keep the figure within :data:`MAX_WIDTH_IN`."""
    heldout, train = spec.axis, f"{spec.axis}_train"
    sources: dict[str, Callable[[str], Metric | None]] = {
        "train": lambda m: exp.metric(m, train, spec.metric),
        "heldout": lambda m: exp.metric(m, heldout, spec.metric),
    }
    if spec.adaptive and exp.attack:
        sources["adaptive"] = lambda m: exp.attack_metric(m, spec.metric)
    methods = exp.methods
    data = {s: [get(m) for m in methods] for s, get in sources.items()}
    data = {s: v for s, v in data.items() if any(v)}
    if not data:
        return None
    fams = {s: _families(exp, e, spec.metric) for s, e in (("train", train), ("heldout", heldout))}
    cols = [(s, f) for s in ("train", "heldout") for f in fams[s]]
    colours = method_colours(methods)
    legend = _split_legend(list(data), spec.unit) + (_method_legend(methods, colours) if cols else [])
    legend_width = legend_inches([str(h.get_label()) for h in legend])
    room = MAX_WIDTH_IN - legend_width - Y_AXIS_IN - 0.2  # inches of panel in one row
    slot = min(1.0, room / len(methods))  # inches per method group
    fam_slot = max(1.3, 0.22 * len(methods) + 0.3)  # inches per family group
    family_rows = row_chunks(len(cols), int(room // fam_slot)) if cols else []
    widths = [max(1.9, slot * len(methods)), *(fam_slot * len(r) for r in family_rows)]
    fig_width = max(widths) + Y_AXIS_IN + legend_width + 0.2
    with matplotlib.rc_context(STYLE):
        fig = new_figure((fig_width, 3.4 * len(widths)))
        panels = fig.subfigures(len(widths), 1, squeeze=False)[:, 0]
        ax = _panel(panels[0], widths[0], max(widths))
        width = 0.8 / len(data)
        for i, (split, metrics) in enumerate(data.items()):
            x = [j + (i - (len(data) - 1) / 2) * width for j in range(len(methods))]
            for xj, m, method in zip(x, metrics, methods, strict=True):
                _bars(ax, [xj], [m], width * 0.92, colours[method], split)
        _group_ticks(ax, [method_label(m) for m in methods], widths[0] / len(methods))
        _format_y(ax, spec.percent, f"{spec.short} ({spec.better} is better)")
        ax.set_title(wrap("Overall, 95% intervals", widths[0], TITLE_PT))
        for n, (panel, chunk) in enumerate(zip(panels[1:], family_rows, strict=True)):
            title = "Per family" + (f" ({n + 1} of {len(family_rows)})" if len(family_rows) > 1 else "")
            _plot_families(_panel(panel, widths[n + 1], max(widths)), exp, spec, [cols[i] for i in chunk], methods,
                           colours, fam_slot, title)
        side_legend(fig, legend)
        title = f"{spec.axis.capitalize()}: {spec.title}, train vs held-out {spec.unit}"
        fig.suptitle(wrap(title, fig_width - 2 * legend_width - 0.4, SUPTITLE_PT, bold=True), fontweight="bold")  # clear of the legend
    return fig


def _panel(sub: Any, width: float, full: float) -> Any:
    """One axes ``width`` inches wide at the left of a row ``full`` inches wide (the rest left empty)."""
    if width >= full - 1e-9:
        return sub.subplots()
    ax, spare = sub.subplots(1, 2, gridspec_kw={"width_ratios": [width, full - width]})
    spare.set_visible(False)
    return ax


def _plot_families(ax: Any, exp: Experiment, spec: AxisSpec, cols: list[tuple[str, str]], methods: Sequence[str],
                   colours: dict[str, str], slot_in: float, title: str = "Per family") -> None:
    """Bars per family of ``cols`` (``(split, family)``; train families first, then held-out), one bar per
    method; ``slot_in`` inches a family."""
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        for j, (split, fam) in enumerate(cols):
            eval_name = spec.axis if split == "heldout" else f"{spec.axis}_train"
            _bars(ax, [j + (i - (len(methods) - 1) / 2) * width], [exp.metric(method, eval_name, f"{spec.metric}/{fam}")],
                  width * 0.92, colours[method], split)
    _group_ticks(ax, [f.replace("_", " ") for _, f in cols], slot_in)
    n_train = sum(s == "train" for s, _ in cols)
    if 0 < n_train < len(cols):
        ax.axvline(n_train - 0.5, color="#333333", linestyle=":", linewidth=1)
    lines = 1
    for split, first, count in (("train", 0, n_train), ("heldout", n_train, len(cols) - n_train)):
        if count:
            label = wrap(SPLIT_LABEL[split].format(unit=spec.unit), 0.9 * slot_in * count, LEGEND_PT)
            lines = max(lines, label.count("\n") + 1)
            ax.text(first + (count - 1) / 2, 1.0, label, ha="center", va="bottom", fontsize=LEGEND_PT, color="#333333",
                    transform=ax.get_xaxis_transform())
    _format_y(ax, spec.percent, "")
    ax.set_title(title, pad=4 + 10 * lines)  # above the split labels


def _tau_points(exp: Experiment, eval_name: str) -> list[tuple[str, float]]:
    out = []
    for key in exp.metric_keys(eval_name):
        if key.startswith("S@"):
            try:
                out.append((key, float(key[2:])))
            except ValueError:
                continue
    return sorted(out, key=lambda kv: kv[1])


def plot_safety_curve(exp: Experiment, panels: Sequence[tuple[str, str]]) -> Figure | None:
    """S(τ), the share of facts whose pass rate is at least τ, per method: one panel per ``(eval, title)``
    of ``panels`` that reported ``S@τ`` metrics."""
    panels = [(e, t) for e, t in panels if _tau_points(exp, e)]
    if not panels:
        return None
    methods, colours = exp.methods, method_colours(exp.methods)
    with matplotlib.rc_context(STYLE):
        panel_in = min(5.0, (MAX_WIDTH_IN - 0.4) / len(panels))
        fig_width = panel_in * len(panels)
        fig = new_figure((fig_width, 3.6))
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)
        for ax, (eval_name, title) in zip(axes[0], panels, strict=True):
            taus = _tau_points(exp, eval_name)
            x = list(range(len(taus)))
            for method in methods:
                ms = [exp.metric(method, eval_name, k) for k, _ in taus]
                if not any(ms):
                    continue
                pts = [(xi, m) for xi, m in zip(x, ms, strict=True) if m is not None]
                ax.plot([p[0] for p in pts], [p[1].value for p in pts], marker="o", ms=3.5, color=colours[method], label=method_label(method))
                band = [(xi, m) for xi, m in pts if m.has_interval]
                if band:
                    ax.fill_between([b[0] for b in band], [b[1].ci_low for b in band], [b[1].ci_high for b in band], color=colours[method], alpha=0.15, linewidth=0)
            ax.set_xticks(x, [f"{t:g}" for _, t in taus])
            ax.set_xlabel("pass-rate threshold τ")
            ax.set_title(wrap(title, panel_in - Y_AXIS_IN, TITLE_PT))
            _format_y(ax, True, "facts with pass rate ≥ τ")
            ax.legend(frameon=False, loc="lower left")
        suptitle = "Safety curve S(τ) (higher is better; shaded: 95% interval)"
        fig.suptitle(wrap(suptitle, fig_width - 0.4, SUPTITLE_PT, bold=True), fontweight="bold")
    return fig


def plot_capability(
    exp: Experiment, evals: Sequence[str], metric_key: Callable[[str], str], title: Callable[[str], str]
) -> Figure | None:
    """Scores of ``evals`` (metric ``metric_key(eval)``, labelled ``title(eval)``) per method; labels give
    each trained method's change from base in points."""
    if not evals:
        return None
    methods, colours = exp.methods, method_colours(exp.methods)
    width = 0.8 / len(methods)
    slot = max(1.6, 0.42 * len(methods) + 0.3)  # inches per eval: room for each bar's change label
    labels = [method_label(m) for m in methods]
    room = MAX_WIDTH_IN - Y_AXIS_IN - legend_inches(labels) - 0.2
    rows = row_chunks(len(evals), int(room // slot))  # evals over as many rows as keep the figure in the column
    axes_width = max(3.5, slot * max(len(r) for r in rows))
    fig_width = axes_width + Y_AXIS_IN + legend_inches(labels) + 0.2
    with matplotlib.rc_context(STYLE):
        fig = new_figure((fig_width, 3.6 * len(rows)))
        for n, (ax, chunk) in enumerate(zip(fig.subplots(len(rows), 1, squeeze=False)[:, 0], rows, strict=True)):
            row_evals = [evals[i] for i in chunk]
            for i, method in enumerate(methods):
                ms = [exp.metric(method, e, metric_key(e)) for e in row_evals]
                x = [j + (i - (len(methods) - 1) / 2) * width for j in range(len(row_evals))]
                _bars(ax, x, ms, width * 0.92, colours[method], "heldout", label=method_label(method) if n == 0 else None)
                for xi, e, m in zip(x, row_evals, ms, strict=True):
                    base = exp.metric("base", e, metric_key(e))
                    if method != "base" and m is not None and base is not None:
                        top = m.ci_high if m.has_interval else m.value
                        ax.text(xi, top + 0.02, f"{(m.value - base.value) * 100:+.1f}".replace("-", "−"), ha="center",
                                va="bottom", fontsize=MIN_FONT_PT)
            _group_ticks(ax, [title(e) for e in row_evals], axes_width / max(len(r) for r in rows))
            ax.set_xlim(-0.5, max(len(r) for r in rows) - 0.5)
            _format_y(ax, True, "score (higher is better)")
            if n == 0:
                heading = "Capability before (base) and after training; labels: change vs base in points"
                ax.set_title(wrap(heading, axes_width, TITLE_PT, bold=True), fontweight="bold")
                side_legend(fig, *ax.get_legend_handles_labels())
    return fig


@dataclass(frozen=True)
class FigureFile:
    """A saved figure: file name stem, its section, the PNG on disk and its smallest text in pixels of the PNG."""

    name: str
    section: str
    path: Path
    min_text_px: float = 0.0


def smallest_text_px(fig: Figure, dpi: float) -> float:
    """The size (pixels at ``dpi``) of the smallest visible, non-empty text ``fig`` draws."""
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes, default=0.0) * dpi / 72


#: ``(file name stem, section, draw)``: a figure :func:`make_figures` draws beside the axes' and training's.
ExtraFigure = tuple[str, str, Callable[[], "Figure | None"]]


def make_figures(exp: Experiment, out_dir: Path, dpi: int = 110, extra: Sequence[ExtraFigure] = ()) -> list[FigureFile]:
    """Draw every figure the experiment has data for (``extra`` first, then each registered axis's, then
    training) and save them as ``out_dir/<name>.png``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots: list[ExtraFigure] = [*extra]
    plots += [(name, axis_name, draw) for axis_name, report in axes_with(ReportView) for name, draw in report.figures(exp)]
    plots.append(("training", "training", lambda: plot_training(exp)))
    saved = []
    for name, section, draw in plots:
        fig = draw()
        path = out_dir / f"{name}.png"
        if fig is None:
            path.unlink(missing_ok=True)  # a stale figure from an earlier report
            continue
        fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata={"Software": None})
        saved.append(FigureFile(name, section, path, smallest_text_px(fig, dpi)))
    return saved
