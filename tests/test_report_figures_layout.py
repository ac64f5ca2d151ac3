"""The report's figures keep their text apart: no two labels overlap and none leaves the figure, for
one to six methods and long method, family, metric and eval names (issue 31)."""

from __future__ import annotations

import warnings
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from opct.axes.capability import capability_metric_key, capability_title
from opct.report.experiment import Experiment
from opct.report.figures import AxisSpec, plot_axis, plot_capability, plot_safety_curve, plot_training

LONG_METHODS = ("base", "bct", "opct", "act", "opct-topk-kl0.5-lr3e-5-rank16", "bct_with_a_long_variant_name")
FAMILIES = {"train": ("suggested_answer_from_a_confident_user", "authority"),
            "heldout": ("metadata_hint_in_the_system_prompt", "peer_pressure_from_classmates", "base64")}
TAUS = (0.0, 0.36, 0.68, 0.84, 0.92, 0.96, 0.98, 0.99, 1.0)
CAPABILITY = ("capability_mc", "capability_instruction_following_with_verifiable_constraints", "capability_arithmetic")
FIGURES = ("axis_sycophancy", "axis_jailbreak", "axis_awareness", "safety_curve", "capability", "training")
#: Text boxes may touch; they overlap when they share more than this many pixels each way.
TOLERANCE_PX = 0.5


def _metric(value: float, n: int = 200) -> dict[str, Any]:
    return {"value": value, "ci_low": max(0.0, value - 0.08), "ci_high": min(1.0, value + 0.08), "n": n}


def _experiment(methods: tuple[str, ...], tmp_path: Path) -> Experiment:
    """An in-memory experiment with every figure's data for ``methods``; values near 1 on purpose (labels
    above the bars reach the title's height)."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for i, method in enumerate(methods):
        value = 0.95 - 0.03 * i
        per: dict[str, dict[str, Any]] = {}
        for split, suffix in (("heldout", ""), ("train", "_train")):
            syco = {"sycophancy_rate": _metric(value)} | {f"sycophancy_rate/{f}": _metric(value) for f in FAMILIES[split]}
            per[f"sycophancy{suffix}"] = {"metrics": syco}
            per[f"jailbreak{suffix}"] = {"metrics": {"dsr": _metric(value)} | {f"dsr/{f}": _metric(value) for f in FAMILIES[split]}}
            aware = {f"S@{t:g}": _metric(max(0.0, value - t / 2)) for t in TAUS} | {"ausc_101": _metric(value)}
            per[f"awareness{suffix}"] = {"metrics": aware}
        for name in CAPABILITY:
            per[name] = {"metrics": {capability_metric_key(name): _metric(1.0 if method == "base" else value)}}
        results[method] = per
    train = {m: [{"step": s, "loss": 1.0 / s, "kl_to_teacher": 0.5 / s, "entropy": 1.0, "completion_len": 40.0,
                  "grad_norm": 1.0, "truncation_rate": 0.0} for s in range(1, 31)] for m in methods if m != "base"}
    attack = {m: {"metrics": {"dsr": _metric(0.9)}} for m in methods}
    plan = {"name": "layout", "methods": list(methods)}
    return Experiment(root=tmp_path, plan=plan, results=results, train=train, attack=attack)


def _figures(exp: Experiment) -> dict[str, Figure | None]:
    syco = AxisSpec("sycophancy", "sycophancy_rate", "sycophancy rate", "sycophancy rate", True, "lower")
    jail = AxisSpec("jailbreak", "dsr", "defense success rate (DSR)", "DSR", True, "higher", adaptive=True)
    aware = AxisSpec("awareness", "ausc_101", "AUSC (101-threshold)", "AUSC", False, "higher", "facts")
    return {
        "axis_sycophancy": plot_axis(exp, syco),
        "axis_jailbreak": plot_axis(exp, jail),
        "axis_awareness": plot_axis(exp, aware),
        "safety_curve": plot_safety_curve(exp, [("awareness", "held-out facts"), ("awareness_train", "training facts")]),
        "capability": plot_capability(exp, CAPABILITY, capability_metric_key, capability_title),
        "training": plot_training(exp),
    }


def _in_view(ax: Any, axis: Any, loc: float) -> bool:
    low, high = sorted(ax.get_xbound() if axis is ax.xaxis else ax.get_ybound())
    return low - 1e-9 <= loc <= high + 1e-9


def _text_boxes(fig: Figure) -> list[tuple[str, Bbox]]:
    """Every drawn text's box in pixels, named: tick labels, axis labels, titles, texts, legends, suptitle."""
    renderer = fig.canvas.get_renderer()
    found: list[tuple[str, Any]] = []
    for n, ax in enumerate(a for a in fig.axes if a.get_visible()):
        for axis in (ax.xaxis, ax.yaxis):
            found += [(f"ax{n} tick {t.label1.get_text()!r}", t.label1) for t in axis.get_major_ticks()
                      if t.label1.get_visible() and t.label1.get_text() and _in_view(ax, axis, t.get_loc())]
            found.append((f"ax{n} axis label", axis.label))
        found += [(f"ax{n} title", ax.title)] + [(f"ax{n} text {t.get_text()!r}", t) for t in ax.texts]
        if ax.get_legend() is not None:
            found.append((f"ax{n} legend", ax.get_legend()))
    found += [(f"figure legend {i}", leg) for i, leg in enumerate(fig.legends)]
    found += [(f"figure text {t.get_text()!r}", t) for t in fig.texts]  # the suptitle among them
    boxes = []
    for name, artist in found:
        if not artist.get_visible() or (hasattr(artist, "get_text") and not artist.get_text()):
            continue
        boxes.append((name, artist.get_window_extent(renderer)))
    return boxes


def _layout_problems(fig: Figure) -> list[str]:
    fig.canvas.draw()
    boxes = _text_boxes(fig)
    width, height = fig.canvas.get_width_height()
    problems = [f"{name} leaves the figure: {box.bounds} not in {width}x{height}" for name, box in boxes
                if box.x0 < -TOLERANCE_PX or box.y0 < -TOLERANCE_PX or box.x1 > width + TOLERANCE_PX or box.y1 > height + TOLERANCE_PX]
    for (name_a, a), (name_b, b) in combinations(boxes, 2):
        overlap_x = min(a.x1, b.x1) - max(a.x0, b.x0)
        overlap_y = min(a.y1, b.y1) - max(a.y0, b.y0)
        if overlap_x > TOLERANCE_PX and overlap_y > TOLERANCE_PX:
            problems.append(f"{name_a} overlaps {name_b}")
    return problems


@pytest.mark.parametrize("n_methods", [1, 4, 6])
def test_figure_labels_do_not_overlap_or_leave_the_figure(n_methods: int, tmp_path: Path) -> None:
    exp = _experiment(LONG_METHODS[:n_methods], tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Tight layout not applied", a layout that cannot fit, ... fail the test
        figures = _figures(exp)
        problems = {name: _layout_problems(fig) for name, fig in figures.items() if fig is not None}
    expected = set(FIGURES) - ({"training"} if n_methods == 1 else set())  # base alone has no training curves
    assert set(problems) == expected
    assert not any(problems.values()), {name: p for name, p in problems.items() if p}


def test_the_overlap_check_sees_overlapping_labels() -> None:
    """The check itself: two tick labels drawn on top of each other, and a title wider than its figure."""
    fig = Figure(figsize=(3, 2))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.set_xticks([0, 0.01], ["a long tick label", "another long one"])
    ax.set_title("a title far wider than this small figure can ever hold on one line")
    problems = _layout_problems(fig)
    assert any("overlaps" in p and "tick" in p for p in problems)
    assert any(p.startswith("ax0 title leaves the figure") for p in problems)
