"""The report's judges section: each judge the evals used, with its measured agreement with a reader, or none.

An agreement is a JSON file in the experiment's ``judge-agreement/`` folder, as ``benchmarks/judge_agreement.py
score`` / ``score-eval`` write it: ``judge`` (its name, e.g. ``rule-sage``), ``accuracy`` and ``kappa`` (estimates
with ``value``, ``ci_low``, ``ci_high``), ``compared``, ``threshold`` and ``headline_eligible``. A judge whose
agreement is below its stated threshold gives no headline number: the section names the evals it judged and says
so, and a judge with no agreement file says that it was not measured against a reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from markupsafe import Markup

from opct.report.experiment import Experiment
from opct.report.html_parts import simple_table
from opct.report.section import ReportInputs, SectionData, render_fragment
from opct.report.table import render_markdown

#: The folder of an experiment that holds its judges' agreement files.
AGREEMENT_DIR = "judge-agreement"
HEADERS = ["judge", "judged evals", "compared with a reader", "accuracy [95%]", "Cohen's kappa [95%]",
           "headline-eligible"]


def judges_used(exp: Experiment) -> dict[str, list[str]]:
    """Each judge name the evals' results record (``rule-refusal+rule-harm@2+1`` is two), with the evals it judged."""
    used: dict[str, list[str]] = {}
    for per_method in exp.results.values():
        for eval_name, result in per_method.items():
            for spec in result.get("judges") or []:
                for name in str(spec).split("@", 1)[0].split("+"):
                    evals = used.setdefault(name, [])
                    if eval_name not in evals:
                        evals.append(eval_name)
    return used


def read_agreements(root: Path) -> dict[str, dict[str, Any]]:
    """The agreement files of ``root/judge-agreement/`` by judge name (a file that is not one is skipped)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((root / AGREEMENT_DIR).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("judge"), str):
            found[data["judge"]] = {**data, "file": path.name}
    return found


def _interval(estimate: dict[str, Any], percent: bool) -> str:
    v, lo, hi = (estimate.get(k) for k in ("value", "ci_low", "ci_high"))
    if not isinstance(v, int | float) or v != v:
        return "undefined"
    if percent:
        return f"{v:.1%} [{lo:.1%}, {hi:.1%}]"
    return f"{v:.2f} [{lo:.2f}, {hi:.2f}]"


class JudgesSection:
    """The judges and their measured agreement; which evals give no headline number for want of it."""

    name, order = "judges", 15
    in_report_json = True

    def data(self, report: ReportInputs) -> SectionData | None:
        used = judges_used(report.exp)
        agreements = read_agreements(report.exp.root)
        if not agreements:
            return None  # nothing measured: the organism's exact judges, or a run whose judges were not checked
        rows, notes = [], []
        for judge, evals in sorted(used.items()):
            found = agreements.get(judge)
            if found is None:
                rows.append([judge, ", ".join(evals), "not measured", "", "", "no agreement measured"])
                continue
            eligible = bool(found.get("headline_eligible"))
            threshold = found.get("threshold") or {}
            rows.append([judge, ", ".join(evals), f"{found.get('compared')} replies ({found['file']})",
                         _interval(found.get("accuracy") or {}, True), _interval(found.get("kappa") or {}, False),
                         "yes" if eligible else "no"])
            if not eligible:
                notes.append(f"{judge} is below its threshold (kappa >= {threshold.get('kappa')}, accuracy >= "
                             f"{threshold.get('accuracy'):.0%}): its numbers in {', '.join(evals)} are not headline numbers."
                             if isinstance(threshold.get("accuracy"), int | float) else
                             f"{judge} is not headline-eligible: its numbers in {', '.join(evals)} are not headline numbers.")
        return {"headers": HEADERS, "rows": rows, "notes": notes}

    def markdown(self, data: SectionData) -> str:
        out = ["## Judges, measured against a reader", "", render_markdown(data["headers"], data["rows"]), ""]
        out += [f"- **{note}**" for note in data["notes"]]
        return "\n".join(out) + "\n"

    def html(self, data: SectionData) -> Markup:
        return render_fragment(
            '{%- from "macros.html.jinja" import table -%}<section id="judges"><h2>Judges, measured against a reader</h2>'
            "{{ table(t) }}{% if notes %}<ul>{% for n in notes %}<li><strong>{{ n }}</strong></li>{% endfor %}</ul>"
            "{% endif %}</section>\n",
            {"t": simple_table(data["headers"], data["rows"], "wrap"), "notes": data["notes"]})


JUDGES_SECTION = JudgesSection()
