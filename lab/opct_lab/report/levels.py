"""The study report's dose-response section: OPCT − BCT per level of the organism's knob against the measured dose.

A study whose ``study.json`` has ``levels`` (``{level: [its families]}``, in the study's order; see
:class:`opct_lab.study.runner.StudyConfig`) gets, beside the pooled report, the pre-registered analysis of
docs/mechanism.md (:mod:`opct_lab.report.trend`): per level, the pooled OPCT − BCT of every metric over
that level's families and seeds (:func:`opct.report.pooled.pooled_rows`, the level's generator seeded
``DEFAULT_SEED + index``), its dose from the profiles in ``<study>/profiles/<family>.json``, the compute the
level's runs spent; per metric, the weighted slope on the dose with its intervals and reading; and the
hypothesis's reading. :func:`levels_data` gives it as JSON-ready data, :func:`levels_markdown` as Markdown
and :func:`plot_dose_response` as a figure.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.report.ablation import COMPUTE_KEYS, variant_compute
from opct.report.dose_response import DOSE_AXES, Dose, primary_dose
from opct.report.experiment import Experiment
from opct.report.pooled import PAPER_PAIR, pooled_record, pooled_rows
from opct.report.table import method_label, render_markdown
from opct.stats.estimate import DEFAULT_SEED
from opct_lab.report.trend import BONFERRONI_ALPHA, LevelPoint, study_hypothesis, trend, trend_record

#: Where a study keeps each family's base-organism profile (its level's dose).
PROFILES_DIR = "profiles"
#: The figure of D against the dose, in the study folder.
FIGURE = "dose_response.png"
#: Panels per row of the figure (one panel per metric).
FIGURE_COLUMNS = 4
#: Profile numbers shown per level and family (besides the dose's own terms).
PROFILE_SHOWN = ("own_seq_logprob", "target_seq_logprob", "divergence_position", "teacher_entropy",
                 "target_cost_after_divergence", "target_percentile_among_own")


def profile_path(root: str | Path, family: str) -> Path:
    """``<study>/profiles/<family>.json``: the off-policy profile of a family's base organism."""
    return Path(root) / PROFILES_DIR / f"{family}.json"


def level_dose(root: Path, families: Sequence[str]) -> tuple[Dose | None, dict[str, Any], list[str]]:
    """The level's dose from the profiles its families have, the profile numbers shown, and the families without one."""
    profiles, missing = {}, []
    for family in families:
        path = profile_path(root, family)
        if path.is_file():
            profiles[family] = json.loads(path.read_text(encoding="utf-8"))
        else:
            missing.append(family)
    shown = {f: {axis: {k: p.get("axes", {}).get(axis, {}).get("measures", {}).get(k, {}).get("value")
                        for k in PROFILE_SHOWN} for axis in DOSE_AXES} for f, p in profiles.items()}
    return (primary_dose(profiles) if profiles else None), shown, missing


@dataclass(frozen=True)
class LevelRows:
    """One level's pooled OPCT − BCT: its families found, its dose and the pooled rows, its bootstrap seeded
    ``DEFAULT_SEED + index`` (``index``: the level's position in the whole study)."""

    level: str
    index: int
    names: Sequence[str]
    found: Mapping[str, Experiment]
    dose: Dose | None
    shown: dict[str, Any]
    no_profile: list[str]
    rows: list[Any]

    @property
    def seed(self) -> int:
        return DEFAULT_SEED + self.index


def level_rows(root: str | Path, levels: Mapping[str, Sequence[str]], families: Mapping[str, Experiment],
               n_resamples: int = 2000, indices: Mapping[str, int] | None = None) -> Iterator[LevelRows]:
    """Each level's :class:`LevelRows`, in the study's order. ``indices``: each level's index in the whole study
    when ``levels`` is part of it (default: its position here)."""
    for position, (level, names) in enumerate(levels.items()):
        index = position if indices is None else indices[level]
        found = {f: families[f] for f in names if f in families}
        dose, shown, no_profile = level_dose(Path(root), names)
        rows = pooled_rows(found, n_resamples=n_resamples, seed=DEFAULT_SEED + index) if found else []
        yield LevelRows(level, index, names, found, dose, shown, no_profile, rows)


def levels_data(root: str | Path, levels: Mapping[str, Sequence[str]], families: Mapping[str, Experiment],
                n_resamples: int = 2000) -> dict[str, Any]:
    """The dose-response section's data (see the module docstring); ``families``: the experiments found."""
    per_level, points, doses, columns = [], {}, [], {}
    for lv in level_rows(root, levels, families, n_resamples):
        level, names, found, dose, rows = lv.level, lv.names, lv.found, lv.dose, lv.rows
        doses.append(dose)
        compute = {}
        for method in PAPER_PAIR:
            spent = [c for exp in found.values() if (c := variant_compute(exp, method)[0])]
            if spent:
                compute[method] = {k: sum(c[k] for c in spent) / len(spent) for k in COMPUTE_KEYS}
        for row in rows:
            columns.setdefault(row.column.key, row)
            if dose is not None:
                points.setdefault(row.column.key, []).append(LevelPoint(level, dose.value, row.difference))
        per_level.append({
            "level": level, "index": lv.index, "seed": lv.seed, "families": list(names),
            "measured_families": list(found), "no_profile": lv.no_profile, "profile": lv.shown, "compute": compute,
            "dose": None if dose is None else {"value": dose.value, "ci_low": dose.ci_low, "ci_high": dose.ci_high,
                                               "per_family": dose.per_family},
            "metrics": {row.column.key: pooled_record(row) for row in rows}})
    trends = {key: trend(points.get(key, []), row.direction[0] if row.direction else None)
              for key, row in columns.items()}
    reading = study_hypothesis(trends, doses)
    return {
        "levels": per_level,
        "trends": [{"key": key, "header": columns[key].column.header, "percent": columns[key].column.percent,
                    **trend_record(t),
                    "incomplete_levels": [lv["level"] for lv in per_level if lv["metrics"].get(key, {}).get("incomplete")]}
                   for key, t in trends.items()],
        "hypothesis": {"outcome": reading.outcome, "reasons": reading.reasons},
        "settings": {"resamples": n_resamples, "seeds": f"{DEFAULT_SEED} + level index", "level": 0.95,
                     "bonferroni_level": 1 - BONFERRONI_ALPHA, "figure": FIGURE},
    }


HOWTO = (
    "The pre-registered analysis of docs/mechanism.md. Per level: OPCT − BCT pooled over that level's families "
    "and seeds exactly as the pooled table above (the level's bootstrap seeded with the report's seed plus the "
    "level's index), with its 95% interval, rows n, units k, cells and unscored rows (left out, never counted "
    "as success). The dose of a level: the mean over its families of the mean over the sycophancy, jailbreak "
    "and awareness axes of the base organism's own-sample minus target sequence log-prob (nats; off-policy "
    "profile, 100 pairs per axis, 4 samples, 128 tokens). Trend: the weighted least-squares slope β of OPCT − "
    "BCT on the dose (weights 1/s², s from each level's 95% interval), its interval the percentiles of β over "
    "2,000 joint resamples of the levels (each level resampled independently, weights fixed); 98.33% is the "
    "Bonferroni level over the three safety metrics. β is per nat of dose (points per nat for a rate)."
)


def format_value(x: float | None, percent: bool, digits: int = 1) -> str:
    """A difference or slope as the report writes it: points (signed, ``digits`` decimals) for a rate, else 3 decimals."""
    if x is None:
        return "—"
    return f"{x * 100:+.{digits}f}" if percent else f"{x:+.3f}"


def format_interval(values: Sequence[float | None], percent: bool) -> str:
    """An interval as the report writes it: ``[low, high]``, each end as :func:`format_value` writes it."""
    return "[" + ", ".join(format_value(v, percent) for v in values) + "]"


#: The trend table's columns after the metric's header (the report adds a note column).
TREND_COLUMNS = ("paper's side", "β (per nat; pts for a rate)", "95%", "98.33%", "reading (95%)", "reading (98.33%)")


def trend_cells(t: Mapping[str, Any]) -> list[str]:
    """A trend's cells under :data:`TREND_COLUMNS`, as the report's trend table writes them (``t``: a trend of
    :func:`levels_data`, or any mapping with its ``paper_side``, ``percent``, ``beta``, intervals and readings)."""
    return [t["paper_side"] or "no claim", format_value(t["beta"], t["percent"]), format_interval(t["ci"], t["percent"]),
            format_interval(t["ci_bonferroni"], t["percent"]), t["reading"], t["reading_bonferroni"]]


def _dose_text(dose: Mapping[str, Any] | None) -> str:
    return "not measured" if dose is None else f"{dose['value']:.3f} [{dose['ci_low']:.3f}, {dose['ci_high']:.3f}]"


def _profile_text(family: str, axes: Mapping[str, Mapping[str, float | None]]) -> str:
    """``llama: own − target 4.1/3.0/2.2; decision position 1.0/0.9/1.2; …`` over the axes S/J/A."""
    def per_axis(get: Any) -> str:
        values = [get(axes.get(a, {})) for a in DOSE_AXES]
        return "/".join("—" if v is None else f"{v:.3g}" for v in values)

    def gap(m: Mapping[str, float | None]) -> float | None:
        own, target = m.get("own_seq_logprob"), m.get("target_seq_logprob")
        return None if own is None or target is None else own - target

    return (f"{family}: own − target {per_axis(gap)}; decision position {per_axis(lambda m: m.get('divergence_position'))}; "
            f"teacher entropy {per_axis(lambda m: m.get('teacher_entropy'))}; target cost after the decision "
            f"{per_axis(lambda m: m.get('target_cost_after_divergence'))}; target percentile among own samples (added "
            f"after the study) {per_axis(lambda m: m.get('target_percentile_among_own'))}")


def dose_direction(levels: Sequence[Mapping[str, Any]]) -> str:
    """How the dose moved from the first measured level to the last, and what β's sign then means in the
    levels' order ("" when fewer than two levels have a dose)."""
    dosed = [lv for lv in levels if lv["dose"] is not None]
    if len(dosed) < 2:
        return ""
    first, last = dosed[0], dosed[-1]
    a, b = first["dose"]["value"], last["dose"]["value"]
    if a == b:
        return f"The dose is the same at {first['level']} and {last['level']} ({a:.3f} nats)."
    rose = b > a
    return (f"From {first['level']} to {last['level']} the dose {'rose' if rose else 'fell'} ({a:.3f} → {b:.3f} nats): "
            f"a {'positive' if rose else 'negative'} β means OPCT − BCT grows from {first['level']} to {last['level']}.")


def levels_markdown(data: Mapping[str, Any]) -> str:
    """The dose-response section of a study's report.md."""
    out = ["## OPCT − BCT per level, against the measured dose (pre-registered: docs/mechanism.md)", "", HOWTO, ""]
    rows = []
    for lv in data["levels"]:
        profile = "; ".join(_profile_text(f, axes) for f, axes in lv["profile"].items())
        missing = f" (no profile: {', '.join(lv['no_profile'])})" if lv["no_profile"] else ""
        rows.append([lv["level"], ", ".join(lv["measured_families"]) or "none run", _dose_text(lv["dose"]) + missing,
                     profile or "—"])
    out += [render_markdown(["level", "families run", "primary dose, nats [95%]",
                             "profile (per family; sycophancy/jailbreak/awareness)"],
                            rows), ""]
    if direction := dose_direction(data["levels"]):
        out += [direction, ""]
    metrics = [t["key"] for t in data["trends"]]
    rows = []
    for key in metrics:
        for lv in data["levels"]:
            r = lv["metrics"].get(key)
            if r is None:
                continue
            rows.append([r["header"], lv["level"], *r["text"]["difference"], str(r["rows"]), str(r["units"]),
                         f"{r['cells']} of {r['cells_planned']}", r["text"]["unscored"], r["verdict"]])
    out += [render_markdown(["metric", "level", "OPCT − BCT", "95% interval", "n", "units k", "cells", "unscored",
                             "verdict"], rows), ""]
    rows = [[lv["level"], method_label(m), *(f"{c[k]:.0f}" for k in COMPUTE_KEYS)]
            for lv in data["levels"] for m, c in lv["compute"].items()]
    if rows:
        out += ["Compute per run (mean over the level's families and seeds):", "",
                render_markdown(["level", "method", *COMPUTE_KEYS], rows), ""]
    rows = []
    for t in data["trends"]:
        notes = ["OPCT ahead at every level (a constant advantage, not a dose-response)"] if t["ahead_everywhere"] else []
        if t["collapsed_levels"]:
            notes.append(f"{t['collapsed_levels']} level(s) whose bootstrap has no spread (every unit agrees): β's "
                         "interval understates its uncertainty")
        if t.get("incomplete_levels"):
            notes.append(f"INCOMPLETE evals at {', '.join(t['incomplete_levels'])}: those levels' differences are over "
                         "what was measured, not measurements")
        note = "; ".join(notes)
        rows.append([t["header"], *trend_cells(t), note])
    out += [render_markdown(["metric", *TREND_COLUMNS, "note"], rows), ""]
    hyp = data["hypothesis"]
    out += [f"**Hypothesis: {hyp['outcome']}.**", "", *(f"- {r}" for r in hyp["reasons"]), "",
            f"![OPCT − BCT against the dose]({data['settings']['figure']})", ""]
    return "\n".join(out)


def plot_dose_response(data: Mapping[str, Any], path: str | Path, dpi: int = 110) -> Path | None:
    """One panel per metric, :data:`FIGURE_COLUMNS` to a row: each level's OPCT − BCT (95% interval) at its
    dose, and the weighted slope through the weighted means. None when no level has both a dose and a difference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trends = [t for t in data["trends"] if any(lv["dose"] and lv["metrics"].get(t["key"], {}).get("value") is not None
                                               for lv in data["levels"])]
    if not trends:
        return None
    cols = min(FIGURE_COLUMNS, len(trends))
    rows = -(-len(trends) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.9 * rows), squeeze=False)
    axes = list(grid.flat)
    for ax in axes[len(trends):]:
        ax.set_visible(False)
    for ax, t in zip(axes, trends, strict=False):
        scale = 100.0 if t["percent"] else 1.0
        pts = [(lv["dose"]["value"], lv["metrics"][t["key"]], lv["level"]) for lv in data["levels"]
               if lv["dose"] and lv["metrics"].get(t["key"], {}).get("value") is not None]
        xs = [x for x, _, _ in pts]
        ys = [r["value"] * scale for _, r, _ in pts]
        err = [[(r["value"] - r["ci_low"]) * scale for _, r, _ in pts], [(r["ci_high"] - r["value"]) * scale for _, r, _ in pts]]
        ax.errorbar(xs, ys, yerr=err, fmt="o", color="#1f5fa8", capsize=3)
        for x, y, (_, _, name) in zip(xs, ys, pts, strict=True):
            ax.annotate(name, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        w = t["weights"]
        if t["beta"] is not None and len(w) == len(xs):
            x_bar = sum(wi * xi for wi, xi in zip(w, xs, strict=True)) / sum(w)
            y_bar = sum(wi * yi for wi, yi in zip(w, ys, strict=True)) / sum(w)
            ax.plot([min(xs), max(xs)], [y_bar + t["beta"] * scale * (x - x_bar) for x in (min(xs), max(xs))],
                    color="#888888", lw=1)
        ax.axhline(0.0, color="black", lw=0.5)
        ax.set_title(textwrap.fill(t["header"], 38) + f"\n{t['reading']}", fontsize=8)
        ax.set_xlabel("dose (nats)", fontsize=8)
        ax.set_ylabel("OPCT − BCT" + (" (pts)" if t["percent"] else ""), fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path


def levels_lines(data: Mapping[str, Any]) -> list[str]:
    """The dose-response section in a few terminal lines: each level's dose, each metric's β and reading, the outcome."""
    lines = ["OPCT − BCT against the measured dose (pre-registered, docs/mechanism.md):",
             "  doses: " + "; ".join(f"{lv['level']} {_dose_text(lv['dose'])}" for lv in data["levels"])]
    for t in data["trends"]:
        lines.append(f"  {t['header']}: β {format_value(t['beta'], t['percent'])} per nat "
                     f"{format_interval(t['ci'], t['percent'])}: {t['reading']} "
                     f"(98.33%: {t['reading_bonferroni']})")
    lines.append(f"  hypothesis: {data['hypothesis']['outcome']}")
    return lines
