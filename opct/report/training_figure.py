"""The report's training figure: every training and validation curve the runs logged, per trained method."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
from matplotlib.figure import Figure

from opct.report.experiment import Experiment
from opct.report.figure_style import (
    MAX_WIDTH_IN,
    OTHER_COLOURS,
    STYLE,
    SUPTITLE_PT,
    TICK_PT,
    Y_AXIS_IN,
    legend_inches,
    method_colours,
    new_figure,
    side_legend,
    wrap,
)
from opct.report.pooled import plan_seeds, split_run_key
from opct.report.table import method_label

#: The width of one panel (inches): three of them fit :data:`MAX_WIDTH_IN`.
PANEL_IN = 3.2


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
    side = len(names) > 4  # many methods or variants: one legend beside the panels, not one in each
    legend_width = legend_inches([method_label(n) for n in names]) if side else 0.0
    cols = max(1, min(len(keys), int((MAX_WIDTH_IN - legend_width) // PANEL_IN)))  # the figure fits the report's column
    rows = (len(keys) + cols - 1) // cols
    with matplotlib.rc_context(STYLE):
        fig = new_figure((PANEL_IN * cols + legend_width, 3.0 * rows))
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
            ax.set_title(wrap(title, PANEL_IN - Y_AXIS_IN, TICK_PT), fontsize=TICK_PT)
            if not side:
                ax.legend(frameon=False, fontsize=8)
        if side:
            entries = {label: handle for ax in axes.flat for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
            side_legend(fig, list(entries.values()), list(entries))
        fig.suptitle(wrap("Training and validation curves", PANEL_IN * cols - legend_width - 0.4, SUPTITLE_PT, bold=True), fontweight="bold")
    return fig


