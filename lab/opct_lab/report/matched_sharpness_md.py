"""The matched-sharpness analysis (:mod:`opct_lab.report.matched_sharpness`) as Markdown: per τ, the reading with
each condition's interval, D per level and metric, the interaction, and the secondary measures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opct_lab.report.matched_sharpness import REFERENCE, fmt_interval


def _n(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _arrow(pair: list[float | None]) -> str:
    return f"{_n(pair[0])} → {_n(pair[1])}"


def _ci_text(rec: Mapping[str, Any] | None) -> str:
    if not rec:
        return "—"
    value = rec.get("value")
    return "—" if value is None else f"{value:+.4f} {fmt_interval([rec.get('ci_low'), rec.get('ci_high')])}"


def tau_markdown(part: Mapping[str, Any]) -> list[str]:
    """One τ's section: the reading and why, D per level and metric, I, the secondary measures."""
    opct, sampled = part["arms"]
    reading = part["reading"]
    lines = [f"## τ = {part['tau']}: {opct} − {sampled}", "", f"**Reading: {reading['outcome']}.**", ""]
    lines += [f"- {r}" for r in reading["reasons"]] + ["", "Conditions (95% and 97.5% intervals):", ""]
    lines += [f"- {c}" for c in reading["conditions"]] + ["", "| level | metric | D | rows | units | cells | unscored | "
                                                          "incomplete |", "|---|---|---|---|---|---|---|---|"]
    for level, data in part["levels"].items():
        for key, rec in data["D"].items():
            lines.append(f"| {level} (seed {data['seed']}) | {key} | {_ci_text(rec)} | {rec['rows']} | {rec['units']} | "
                         f"{rec['cells']}/{rec['cells_planned']} | {rec['text']['unscored']} | "
                         f"{', '.join(rec['incomplete']) or '—'} |")
    lines += ["", "| metric | I = D_L3 − D_L1 | 95% | 97.5% | resamples used |", "|---|---|---|---|---|"]
    for key, i in part["interaction"].items():
        lines.append(f"| {key} | {i['value'] if i['value'] is None else format(i['value'], '+.4f')} | {fmt_interval(i['ci95'])} | "
                     f"{fmt_interval(i['ci975'])} | {i['resamples_used']} of {i['resamples']} |")
    for pair in (f"{REFERENCE} − {sampled}", f"{REFERENCE} − {opct}"):
        lines += ["", f"{pair} (secondary):", ""]
        lines += [f"- {level} {key}: {_ci_text(rec)}" for level, rows in part[pair].items() for key, rec in rows.items()]
    lines += ["", "KL(fine-tuned ‖ base) per arm and level (mean over complete runs; runs cut off listed):", ""]
    lines += [f"- {level} {arm}: {_n(v['mean_kl'])} over {v['runs']} runs; cut off: {', '.join(v['incomplete']) or 'none'}"
              for level, arms in part["kl_to_base"].items() for arm, v in arms.items()]
    lines += ["", "OPCT runs (entropy and teacher-KL, first → last):", ""]
    lines += [f"- {r['family']}/{r['run']}: entropy {_arrow(r['entropy'])}, teacher-KL {_arrow(r['teacher_kl'])}"
              f"{' — COLLAPSE WARNING: ' + r['warning'] if r['collapsed'] else ''}" for r in part["health"]["opct"]]
    lines += ["", "BCT-sampled runs (targets' entropy, share cut at the limit):", ""]
    lines += [f"- {r['family']}/{r['run']}: entropy {_n(r['target_entropy'])}, cut {_n(r['cut_share'])}" for r in part["health"]["bct_sampled"]]
    if "sensitivity_without_collapsed" in part:
        sens = part["sensitivity_without_collapsed"]
        lines += ["", f"Sensitivity check, not the reading (without {', '.join(sens['left_out'])}):", ""]
        lines += [f"- {level} D {key}: {_ci_text(rec)}" for level, rows in sens["D"].items() for key, rec in rows.items()]
        lines += [f"- I {key}: {i['value']} 95% {fmt_interval(i['ci95'])} 97.5% {fmt_interval(i['ci975'])}"
                  for key, i in sens["interaction"].items()]
    return lines


def analysis_markdown(data: Mapping[str, Any]) -> str:
    """The analysis as Markdown: the τ = 1.0 section, then τ = 0.5's when it was run."""
    lines = ["# Matched sharpness: the pre-registered analysis (docs/matched_sharpness.md)", "",
             f"{data['resamples']} resamples, seeds {data['seeds']}.", ""]
    lines += tau_markdown(data["tau_1.0"])
    if "tau_0.5" in data:
        lines += ["", *tau_markdown(data["tau_0.5"]), ""]
        if data["readings_differ"]:
            lines.append("The τ = 1.0 and τ = 0.5 readings differ: a sentence for users names the temperature it holds at.")
    return "\n".join(lines) + "\n"
