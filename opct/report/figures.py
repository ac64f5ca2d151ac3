"""The report's figures (matplotlib's object API on the Agg canvas; pyplot's global state is not used): per-axis bars, the safety curve, capability, training.

Each ``plot_*`` function returns a matplotlib figure, or None when the experiment has nothing to
draw. Methods keep one colour everywhere (Okabe-Ito, colour-blind safe); train-family bars are
hatched and held-out ones solid.

Labels never overlap, whatever the number of methods and the length of their names: figures use
matplotlib's constrained layout, grow with the number of bar groups, wrap tick labels and titles to
the room they have (:func:`_wrap`) and put the legends of bar charts outside the axes, on the right.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import PercentFormatter

from opct.report.load import Experiment, Metric
from opct.report.pooled import plan_seeds, split_run_key
from opct.report.table import method_label

FIXED_COLOURS = {"base": "#6E6E6E", "bct": "#E69F00", "opct": "#0072B2"}
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


def method_colours(methods: Sequence[str]) -> dict[str, str]:
    """A stable colour per method: base grey, BCT orange, OPCT blue, others from Okabe-Ito."""
    others = iter(OTHER_COLOURS * (1 + len(methods) // len(OTHER_COLOURS)))
    return {m: FIXED_COLOURS.get(m) or next(others) for m in methods}


def _new_figure(size: tuple[float, float]) -> Figure:
    fig = Figure(figsize=size, layout="constrained")  # room for every label, legend and title; never "not applied"
    FigureCanvasAgg(fig)
    return fig


def _wrap(text: str, inches: float, points: float, bold: bool = False) -> str:
    """``text`` broken into lines no wider than ``inches`` at ``points`` (at spaces and hyphens, inside a
    word only when one word is wider than that)."""
    chars = max(4, int(inches * 72 / (points * (BOLD_EM if bold else CHAR_EM))))
    return "\n".join(textwrap.wrap(text, chars)) or text


def _legend_inches(labels: Sequence[str]) -> float:
    """The width of a one-column legend of ``labels`` (handle, padding and the longest label)."""
    return (max(map(len, labels), default=0) * LEGEND_PT * CHAR_EM + 4 * LEGEND_PT) / 72


def _side_legend(fig: Figure, handles: Sequence[Any], labels: Sequence[str] | None = None) -> None:
    """One legend column outside the axes, on the figure's right (constrained layout makes room)."""
    if labels is None:
        fig.legend(handles=list(handles), loc="outside right upper", frameon=False)
    else:
        fig.legend(list(handles), list(labels), loc="outside right upper", frameon=False)


def _group_ticks(ax: Any, labels: Sequence[str], slot_in: float) -> None:
    """One tick per bar group at 0, 1, ..., each label wrapped to its group's width ``slot_in`` (inches)."""
    ax.set_xticks(range(len(labels)), [_wrap(label, 0.9 * slot_in, TICK_PT) for label in labels])
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
            ax.text(xi, 0.01, "n/a", ha="center", va="bottom", fontsize=7, color="#555555", transform=ax.get_xaxis_transform())


def _format_y(ax: Any, percent: bool, label: str, height_in: float = 2.0) -> None:
    ax.set_ylim(0, 1.05)
    if percent:
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylabel(_wrap(label, height_in, TICK_PT))


def _families(exp: Experiment, eval_name: str, metric: str) -> list[str]:
    prefix = f"{metric}/"
    return [k[len(prefix):] for k in exp.metric_keys(eval_name) if k.startswith(prefix)]


def _split_legend(splits: Sequence[str], unit: str) -> list[Patch]:
    return [Patch(facecolor="#BBBBBB", edgecolor="#555555", hatch=SPLIT_STYLE[s]["hatch"], alpha=SPLIT_STYLE[s]["alpha"],
                  label=SPLIT_LABEL[s].format(unit=unit)) for s in splits]


def _method_legend(methods: Sequence[str], colours: dict[str, str]) -> list[Patch]:
    return [Patch(facecolor=colours[m], label=method_label(m)) for m in methods]


def plot_axis(exp: Experiment, spec: AxisSpec) -> Figure | None:
    """Overall train vs held-out (and adaptive-attacker) bars per method, then bars per family."""
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
    n_fams = sum(len(f) for f in fams.values())
    colours = method_colours(methods)
    legend = _split_legend(list(data), spec.unit) + (_method_legend(methods, colours) if n_fams else [])
    slot, fam_slot = 1.0, max(1.3, 0.22 * len(methods) + 0.3)  # inches per method group, per family group
    widths = [max(1.9, slot * len(methods))] + ([fam_slot * n_fams] if n_fams else [])
    legend_width = _legend_inches([str(h.get_label()) for h in legend])
    fig_width = sum(widths) + Y_AXIS_IN * len(widths) + legend_width + 0.2
    with matplotlib.rc_context(STYLE):
        fig = _new_figure((fig_width, 3.6))
        axes = fig.subplots(1, len(widths), gridspec_kw={"width_ratios": widths}, squeeze=False)
        ax = axes[0][0]
        width = 0.8 / len(data)
        for i, (split, metrics) in enumerate(data.items()):
            x = [j + (i - (len(data) - 1) / 2) * width for j in range(len(methods))]
            for xj, m, method in zip(x, metrics, methods, strict=True):
                _bars(ax, [xj], [m], width * 0.92, colours[method], split)
        _group_ticks(ax, [method_label(m) for m in methods], widths[0] / len(methods))
        _format_y(ax, spec.percent, f"{spec.short} ({spec.better} is better)")
        ax.set_title(_wrap("Overall, 95% intervals", widths[0], TITLE_PT))
        if n_fams:
            _plot_families(axes[0][1], exp, spec, fams, methods, colours, fam_slot)
        _side_legend(fig, legend)
        title = f"{spec.axis.capitalize()}: {spec.title}, train vs held-out {spec.unit}"
        fig.suptitle(_wrap(title, fig_width - 2 * legend_width - 0.4, SUPTITLE_PT, bold=True), fontweight="bold")  # clear of the legend
    return fig


def _plot_families(ax: Any, exp: Experiment, spec: AxisSpec, fams: dict[str, list[str]], methods: Sequence[str],
                   colours: dict[str, str], slot_in: float) -> None:
    """Bars per family (train families first, then held-out), one bar per method; ``slot_in`` inches a family."""
    cols = [(s, f) for s in ("train", "heldout") for f in fams[s]]
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        for j, (split, fam) in enumerate(cols):
            eval_name = spec.axis if split == "heldout" else f"{spec.axis}_train"
            _bars(ax, [j + (i - (len(methods) - 1) / 2) * width], [exp.metric(method, eval_name, f"{spec.metric}/{fam}")],
                  width * 0.92, colours[method], split)
    _group_ticks(ax, [f.replace("_", " ") for _, f in cols], slot_in)
    if fams["train"] and fams["heldout"]:
        ax.axvline(len(fams["train"]) - 0.5, color="#333333", linestyle=":", linewidth=1)
    lines = 1
    for split, centre in (("train", (len(fams["train"]) - 1) / 2), ("heldout", len(fams["train"]) + (len(fams["heldout"]) - 1) / 2)):
        if fams[split]:
            label = _wrap(SPLIT_LABEL[split].format(unit=spec.unit), 0.9 * slot_in * len(fams[split]), LEGEND_PT)
            lines = max(lines, label.count("\n") + 1)
            ax.text(centre, 1.0, label, ha="center", va="bottom", fontsize=LEGEND_PT, color="#333333", transform=ax.get_xaxis_transform())
    _format_y(ax, spec.percent, "")
    ax.set_title("Per family", pad=4 + 10 * lines)  # above the split labels


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
        fig_width = 5.0 * len(panels)
        fig = _new_figure((fig_width, 3.6))
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
            ax.set_title(_wrap(title, 5.0 - Y_AXIS_IN, TITLE_PT))
            _format_y(ax, True, "facts with pass rate ≥ τ")
            ax.legend(frameon=False, loc="lower left")
        suptitle = "Safety curve S(τ) (higher is better; shaded: 95% interval)"
        fig.suptitle(_wrap(suptitle, fig_width - 0.4, SUPTITLE_PT, bold=True), fontweight="bold")
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
    axes_width = max(3.5, slot * len(evals))
    labels = [method_label(m) for m in methods]
    fig_width = axes_width + Y_AXIS_IN + _legend_inches(labels) + 0.2
    with matplotlib.rc_context(STYLE):
        fig = _new_figure((fig_width, 3.6))
        ax = fig.subplots()
        for i, method in enumerate(methods):
            ms = [exp.metric(method, e, metric_key(e)) for e in evals]
            x = [j + (i - (len(methods) - 1) / 2) * width for j in range(len(evals))]
            _bars(ax, x, ms, width * 0.92, colours[method], "heldout", label=method_label(method))
            for xi, e, m in zip(x, evals, ms, strict=True):
                base = exp.metric("base", e, metric_key(e))
                if method != "base" and m is not None and base is not None:
                    top = m.ci_high if m.has_interval else m.value
                    ax.text(xi, top + 0.02, f"{(m.value - base.value) * 100:+.1f}".replace("-", "−"), ha="center", va="bottom", fontsize=7)
        _group_ticks(ax, [title(e) for e in evals], axes_width / len(evals))
        _format_y(ax, True, "score (higher is better)")
        heading = "Capability before (base) and after training; labels: change vs base in points"
        ax.set_title(_wrap(heading, axes_width, TITLE_PT, bold=True), fontweight="bold")
        _side_legend(fig, *ax.get_legend_handles_labels())
    return fig


def _ema(values: Sequence[float], span: int) -> list[float]:
    alpha, out, acc = 2 / (span + 1), [], None
    for v in values:
        acc = v if acc is None else alpha * v + (1 - alpha) * acc
        out.append(acc)
    return out


#: The training figure's panels: ``(key, title, source)``; ``validation`` keys start at step 0.
TRAINING_PANELS = (
    ("loss", "training loss", "train"),
    ("kl_to_teacher", "KL to teacher on the rollouts (per token)", "train"),
    ("val_teacher_kl", "validation teacher-KL (per token)", "validation"),
    ("val_good", "validation good-behaviour rate", "validation"),
    ("entropy", "entropy per completion token", "train"),
    ("completion_len", "completion length (tokens)", "train"),
    ("truncation_rate", "truncation rate", "train"),
    ("grad_norm", "gradient norm", "train"),
)


def plot_training(exp: Experiment) -> Figure | None:
    """Every training and validation curve the runs logged, per trained method (raw faint, smoothed bold);
    a method's (or variant's) seeds share its colour and its one legend entry."""
    sources = {"train": exp.train, "validation": exp.validation}
    keys = [(k, t, src) for k, t, src in TRAINING_PANELS
            if any(isinstance(r.get(k), int | float) for rows in sources[src].values() for r in rows)]
    if not keys:
        return None
    seeds = plan_seeds(exp)
    group = {key: split_run_key(key, seeds)[0] for key in exp.methods}  # a method or variant's seeds share a colour
    names = list(dict.fromkeys(group.values()))
    colours = method_colours(names)
    if len(names) > len(OTHER_COLOURS) + 1:  # an ablation's many variants: a palette with that many colours
        colours = {name: matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"](i) for i, name in enumerate(names)}
    cols = min(4, len(keys))
    rows = (len(keys) + cols - 1) // cols
    side = len(names) > 4  # many methods or variants: one legend beside the panels, not one in each
    legend_width = _legend_inches([method_label(n) for n in names]) if side else 0.0
    with matplotlib.rc_context(STYLE):
        fig = _new_figure((4.2 * cols + legend_width, 3.2 * rows))
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax in axes.flat[len(keys):]:
            ax.set_visible(False)
        for ax, (key, title, src) in zip(axes.flat, keys, strict=False):
            labelled: set[str] = set()
            for method in exp.methods:
                pts = [(r["step"], r[key]) for r in sources[src].get(method, [])
                       if isinstance(r.get(key), int | float) and "step" in r and r[key] == r[key]]
                if not pts:
                    continue
                steps, vals = [p[0] for p in pts], [p[1] for p in pts]
                smooth, name = len(vals) >= 20, group[method]
                label = None if name in labelled else method_label(name)
                labelled.add(name)
                ax.plot(steps, vals, color=colours[name], alpha=0.3 if smooth else 1.0, linewidth=0.8,
                        marker=None if smooth else ".", label=None if smooth else label)
                if smooth:
                    ax.plot(steps, _ema(vals, max(5, len(vals) // 15)), color=colours[name], linewidth=1.8, label=label)
            ax.set_xlabel("optimizer step")
            ax.set_title(_wrap(title, 4.2 - Y_AXIS_IN, TICK_PT), fontsize=TICK_PT)
            if not side:
                ax.legend(frameon=False, fontsize=8)
        if side:
            entries = {label: handle for ax in axes.flat for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
            _side_legend(fig, list(entries.values()), list(entries))
        fig.suptitle(_wrap("Training and validation curves", 4.2 * cols - legend_width - 0.4, SUPTITLE_PT, bold=True), fontweight="bold")
    return fig


@dataclass(frozen=True)
class FigureFile:
    """A saved figure: file name stem, its section and the PNG on disk."""

    name: str
    section: str
    path: Path


def make_figures(exp: Experiment, out_dir: Path, dpi: int = 110) -> list[FigureFile]:
    """Draw every figure the experiment has data for (each registered axis's, then training) and save
    them as ``out_dir/<name>.png``."""
    from opct.axes import AXES

    out_dir.mkdir(parents=True, exist_ok=True)
    plots: list[tuple[str, str, Callable[[], Figure | None]]] = [
        (name, axis_name, draw) for axis_name, axis in AXES.items() for name, draw in axis.report_figures(exp)
    ]
    plots.append(("training", "training", lambda: plot_training(exp)))
    saved = []
    for name, section, draw in plots:
        fig = draw()
        path = out_dir / f"{name}.png"
        if fig is None:
            path.unlink(missing_ok=True)  # a stale figure from an earlier report
            continue
        fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata={"Software": None})
        saved.append(FigureFile(name, section, path))
    return saved
