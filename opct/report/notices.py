"""The report's warnings as sentences, grouped by run.

What an eval or attack left unscored is read from its ``results.json`` (the fields the runner writes:
``status``, ``unscored``, ``n_records``, ``outcomes``, ``max_unscored``) and said in words: how many of
how many, of which outcome class, and whether that makes the number no measurement. A trained run whose
own samples degenerated while it trained is said from its ``metrics.jsonl``
(:mod:`opct.report.rollout_health`). Every other
warning the loader gave (a file it could not read, lines it skipped) is kept, its path made relative
to the experiment and put under the run it belongs to.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opct.report.experiment import Experiment
from opct.report.rollout_health import rollout_collapse
from opct.report.table import method_label
from opct.runs.experiment_layout import ExperimentLayout

#: The group of a warning about no run in particular (the plan, the manifest, the selection).
EXPERIMENT = "experiment"


def _counts(counts: Mapping[str, Any], skip: tuple[str, ...] = ("scored",)) -> str:
    """``"7 truncated, 2 empty"``: the non-zero counts of ``counts`` but ``skip``."""
    parts = [f"{v} {k.replace('_', '-')}" for k, v in counts.items() if k not in skip and isinstance(v, int) and v]
    return ", ".join(parts)


def _share(limit: Any) -> str:
    return f"{limit * 100:g}%" if isinstance(limit, int | float) else "its limit"


def eval_sentence(eval_name: str, data: Mapping[str, Any]) -> str | None:
    """What ``eval_name``'s results say went unscored, in a sentence; None when nothing did."""
    unscored, total = data.get("unscored"), data.get("n_records")
    classes = data.get("unscored_classes")
    outcomes = data.get("outcomes") if isinstance(data.get("outcomes"), Mapping) else {}
    which = _counts({k: v for k, v in outcomes.items() if not classes or k in classes})
    detail = f" ({which})" if which else ""
    if data.get("status") == "incomplete":
        return (f"{eval_name}: INCOMPLETE. {unscored} of {total} answers were unscored{detail}, more than its limit "
                f"of {_share(data.get('max_unscored'))}, so its numbers are not a measurement.")
    if data.get("complete") is False:
        return f"{eval_name}: its results are marked incomplete, so its numbers are not a measurement."
    wrong_classes = data.get("counted_wrong_classes") or ()
    wrong = {k: v for k, v in outcomes.items() if k in wrong_classes and isinstance(v, int) and v}
    counted = (f"{sum(wrong.values())} of {total} answers ({_counts(wrong)}) count as wrong answers: "
               "no answer within the limit is not a right one.") if wrong else ""
    if isinstance(unscored, int) and unscored > 0:
        return (f"{eval_name}: {unscored} of {total} answers could not be scored{detail}; they are left out of n, "
                f"never counted as a success.{' ' + counted if counted else ''}")
    return f"{eval_name}: {counted}" if counted else None


def attack_sentence(data: Mapping[str, Any]) -> str | None:
    """What the adaptive attack's results say went unscored, in a sentence; None when nothing did."""
    if data.get("status") != "incomplete":
        return None
    outcomes = data.get("outcomes")
    behaviours = outcomes.get("behaviors") if isinstance(outcomes, Mapping) else None
    counts = behaviours if isinstance(behaviours, Mapping) else {}
    total = data.get("n") or sum(v for v in counts.values() if isinstance(v, int))
    unscored = counts.get("unscored", "some")
    rest = _counts(counts, ("unscored",))
    return (f"adaptive attack: INCOMPLETE. {unscored} of {total} behaviours were unscored (an attempt could not be "
            f"judged and none cracked it{'; of the others ' + rest if rest else ''}), so its defense rate is not a "
            "measurement.")


def _run_of(exp: Experiment, text: str) -> tuple[str, str]:
    """``(run, text with the experiment's folder cut from its paths)`` of one of the loader's warnings."""
    root = str(exp.root)
    run = EXPERIMENT
    at = text.find(root + "/")
    if at >= 0:
        rel = Path(text[at + len(root) + 1:].split(":")[0].split(" ")[0])
        if len(rel.parts) > 2 and rel.parts[0] in {p.name for p in ExperimentLayout(exp.root).per_model}:
            run = rel.parts[1]
    return run, text.replace(root + "/", "")


def warning_groups(exp: Experiment) -> list[tuple[str, list[str]]]:
    """``[(run label, [sentence, ...]), ...]``: every warning of the report, runs in the experiment's order,
    the experiment's own last."""
    groups: dict[str, list[str]] = {}
    layout = ExperimentLayout(exp.root)
    covered: list[str] = []  # the results files said in words here; the loader's lines about them are dropped
    for method in exp.methods:
        for eval_name, data in sorted(exp.results.get(method, {}).items()):
            covered.append(str(layout.eval(method).results(eval_name)) + ":")
            if (line := eval_sentence(eval_name, data)) is not None:
                groups.setdefault(method, []).append(line)
        if (attack := exp.attack.get(method)) is not None:
            covered.append(str(layout.attack(method).results) + ":")
            if (line := attack_sentence(attack)) is not None:
                groups.setdefault(method, []).append(line)
        if (collapse := rollout_collapse(exp.train.get(method, []))) is not None:
            groups.setdefault(method, []).append(f"training: {collapse.sentence()}")
    for text in exp.warnings:
        if any(text.startswith(prefix) for prefix in covered):
            continue
        run, said = _run_of(exp, text)
        groups.setdefault(run, []).append(said if said.endswith(".") else said + ".")
    order = [m for m in exp.methods if m in groups] + sorted(set(groups) - set(exp.methods) - {EXPERIMENT})
    order += [EXPERIMENT] if EXPERIMENT in groups else []
    return [(method_label(run) if run != EXPERIMENT else EXPERIMENT, groups[run]) for run in order]


def warning_count(groups: list[tuple[str, list[str]]]) -> int:
    """How many sentences ``groups`` holds."""
    return sum(len(lines) for _, lines in groups)
