"""The selection table: every candidate recipe with its validation numbers, and each rule's pick."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.table import Table


def fmt_value(value: float | None, digits: int = 3) -> str:
    """A number with ``digits`` decimals, or — when it is missing or NaN."""
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _recipe(recipe: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v['kind'] if isinstance(v, dict) and 'kind' in v else v}" for k, v in recipe.items())


def best_rows(selection: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per candidate: its recipe and its lowest-teacher-KL eligible step (or its last step)."""
    rows = []
    for c in selection["candidates"]:
        steps = c["steps"]
        eligible = {int(k): v for k, v in steps.items() if v["eligible"]}
        pool = eligible or {int(k): v for k, v in steps.items()}
        step = min(pool, key=lambda k: (pool[k]["val_teacher_kl"], k))
        m = pool[step]
        scored = {k: v["family_score"] for k, v in steps.items() if v["eligible"] and not _missing(v.get("family_score"))}
        best = max(scored, key=lambda k: (scored[k], -int(k))) if scored else None
        rows.append({"id": c["id"], "method": c["method"], "recipe": _recipe(c["recipe"]), "step": step,
                     "val_teacher_kl": m["val_teacher_kl"], "val_good": m["val_good"],
                     "famval_good": m.get("famval_good", math.nan),
                     "family_score": f"{scored[best]:.3f} (step {best})" if best is not None else "—",
                     "eligible_steps": f"{len(eligible)}/{len(steps)}",
                     "min_cap": min(m["val_cap"].values()) if m["val_cap"] else math.nan,
                     "seconds": m["compute"]["train_seconds"]})
    return rows


def chosen_lines(selection: dict[str, Any], methods: Sequence[str] | None = None) -> list[str]:
    """``bct, teacher_kl rule: bct-03 at step 120 (optim.lr=0.001): KL 0.123, good 0.812``, one per method and rule
    (of ``methods`` only, when given)."""
    lines = []
    for method, by_rule in selection["chosen"].items():
        if methods is not None and method not in methods:
            continue
        for rule, choice in by_rule.items():
            if choice is None:
                lines.append(f"{method}, {rule} rule: no eligible recipe (every candidate failed the capability guard)")
                continue
            lines.append(
                f"{method}, {rule} rule: {choice['candidate']} at step {choice['step']} ({_recipe(choice['recipe'])}): "
                f"val teacher-KL {fmt_value(choice['val_teacher_kl'])}, val good-behaviour {fmt_value(choice['val_good'])}"
                + _family_part(choice)
            )
    return lines


def selection_markdown(selection: dict[str, Any], methods: Sequence[str] | None = None) -> str:
    """The selection table and the picks, as Markdown (the candidates and picks of ``methods`` only, when given)."""
    head = ("| candidate | recipe | best step (KL) | val teacher-KL | val good-behaviour | famval good-behaviour "
            "| best family score (step) | eligible steps | train s |")
    rules = "; ".join(f"{name}: {text}" for name, text in selection["rules"].items() if name != "eligible")
    lines = ["## Recipe selection (validation split)", "",
             f"Rules (fixed before any held-out number): {selection['rules']['eligible']}; {rules}. "
             f"Seeds {selection['seeds']}, {selection['steps']} steps measured every {selection['every']}, "
             f"{selection['pairs_per_step']} pairs per step; candidates per method: {selection['budget']}.", "",
             *[f"{line}" for line in family_lines(selection)], "",
             head, "|---|---|---|---|---|---|---|---|---|"]
    for r in best_rows(selection):
        if methods is not None and r["method"] not in methods:
            continue
        lines.append(f"| {r['id']} | {r['recipe']} | {r['step']} | {fmt_value(r['val_teacher_kl'])} | {fmt_value(r['val_good'])} "
                     f"| {fmt_value(r['famval_good'])} | {r['family_score']} | {r['eligible_steps']} | {r['seconds']:.0f} |")
    headers, rows = picks_table(selection, methods)
    lines += ["", "Each rule's pick, side by side:", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
              *["| " + " | ".join(row) + " |" for row in rows]]
    lines += ["", *[f"- {line}" for line in chosen_lines(selection, methods)], ""]
    return "\n".join(lines)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _family_part(choice: dict[str, Any]) -> str:
    """The family-validation numbers of a pick, when the selection measured them."""
    if _missing(choice.get("famval_good")):
        return ""
    attack = choice.get("family_attack") or {}
    defended = f", validation attack defended {fmt_value(attack.get('defended_rate'))}" if attack else ""
    return f", famval good-behaviour {fmt_value(choice['famval_good'])}, family score {fmt_value(choice.get('family_score'))}{defended}"


def picks_table(selection: dict[str, Any], methods: Sequence[str] | None = None) -> tuple[list[str], list[list[str]]]:
    """``method x rule``: each rule's pick (candidate, step, recipe), of ``methods`` only when given; a rule
    an older selection lacks reads —."""
    rules = [r for r in selection.get("rules", {}) if r != "eligible"]
    rows = []
    for method, by_rule in selection["chosen"].items():
        if methods is not None and method not in methods:
            continue
        cells = []
        for rule in rules:
            choice = by_rule.get(rule)
            cells.append("—" if not choice else f"{choice['candidate']} @ {choice['step']} ({_recipe(choice['recipe'])})")
        distinct = len({c for c in cells if c != "—"})
        rows.append([method, *cells, "yes" if distinct <= 1 else f"no ({distinct} recipes)"])
    return ["method", *rules, "picks agree"], rows


def family_lines(selection: dict[str, Any]) -> list[str]:
    """What the family_transfer rule held back and what its attack cost (empty for an older selection)."""
    lines = []
    if "family_transfer" not in selection.get("rules", {}):
        lines.append("This selection predates the family_transfer rule (transfer to held-back training families): "
                     "its candidates trained on every training family, and it has no family-validation pick.")
    held = selection.get("family_validation") or {}
    if held:
        lines.append("Family validation: held back from training (every candidate and every comparison run trains without "
                     "them): " + "; ".join(f"{axis} {', '.join(h['families'])}" for axis, h in held.items()) + ".")
    cost = selection.get("family_attack")
    if cost:
        lines.append(f"Validation attack: budget {cost['budget']} queries on each of {cost['behaviors']} validation behaviours, "
                     f"on each candidate's best {cost['top']} checkpoints and every seed: {cost['attacks']} attacks, "
                     f"{cost['queries']} queries, {cost['seconds']:.0f} s ({fmt_value(cost['seconds_per_attack'], 1)} s per attack).")
    return lines


def selection_table(selection: dict[str, Any]) -> Table:
    """The same table for the terminal."""
    table = Table(title="recipe selection (validation)", title_justify="left")
    for name in ("candidate", "recipe", "step", "val KL", "val good", "famval good", "family score", "eligible"):
        table.add_column(name, overflow="fold")
    for r in best_rows(selection):
        table.add_row(r["id"], r["recipe"], str(r["step"]), fmt_value(r["val_teacher_kl"]), fmt_value(r["val_good"]),
                      fmt_value(r["famval_good"]), r["family_score"], r["eligible_steps"])
    return table


RECIPE_HEADERS = ["method", "lr", "steps", "pairs/step", "divergence", "samples or targets (n, T)", "chosen by"]


def recipe_rows(plan: dict[str, Any], selection: dict[str, Any]) -> list[list[str]]:
    """One row per trained run of an experiment: the recipe it trained with and what chose it."""
    rule = plan.get("selection_rule")
    rows = []
    for key, r in (plan.get("recipes") or {}).items():
        method, *rest = key.split("-")
        if rest and rest[0] in selection.get("rules", {}) and method in selection.get("chosen", {}):
            chosen = f"opct select ({rest[0]} rule)"  # a variant that trains another rule's pick (compare_rules)
        elif rule and method in selection.get("chosen", {}):
            chosen = f"opct select ({rule} rule)"
        else:
            chosen = "the experiment file"
        samples = f"{r['n']}, {r['temperature']:g}" if "n" in r else targets_cell(r["targets"]) if "targets" in r else "—"
        rows.append([key, f"{r['lr']:g}", str(r["steps"]), str(r["pairs_per_step"]), str(r.get("loss", "—")), samples, chosen])
    return rows


def targets_cell(targets: dict[str, Any]) -> str:
    """BCT's target settings as the recipe table names them: ``targets 1, 0 (greedy); awareness 3, 1``."""
    def one(n: Any, temperature: Any) -> str:
        return f"{n}, {temperature:g}" + (" (greedy)" if temperature == 0 else "")
    parts = [f"targets {one(targets['n'], targets['temperature'])}"]
    for axis, o in (targets.get("per_axis") or {}).items():
        parts.append(f"{axis} {one(o.get('n', targets['n']), o.get('temperature', targets['temperature']))}")
    return "; ".join(parts)


def held_back_line(plan: dict[str, Any]) -> str | None:
    """What the experiment's training left out for family validation (its plan's ``held_back_families``)."""
    held = plan.get("held_back_families") or {}
    if not held:
        return None
    return ("Training used the remaining training families: held back for family validation (never trained on) "
            + "; ".join(f"{axis} {', '.join(fams)}" for axis, fams in held.items()) + ".")


#: How to read the off-policy profile (shown above its table).
PROFILE_HOWTO = (
    "How far BCT's targets are from what the student does itself, measured on the run-start model before any "
    "step (opct/diagnostics/offpolicy.py). The target is the frozen model's greedy answer to the clean prompt "
    "(teacher_prompt); the student answers the cued prompt. The decision token is the first token where the two "
    "differ: a low target probability there means the targets are off-policy exactly where the behaviour is "
    "decided, whatever the per-token average over a long, nearly deterministic tail says. The teacher's top-1 "
    "mass there is how sharp the distribution OPCT copies is; BCT trains on a one-hot target. What it does not "
    "show: which method transfers better; it describes the data, not the trained models. Each cell: value "
    "[95% interval, clusters = pairs sharing a teacher_prompt] n; sequences cut off at the token limit are "
    "counted, never scored."
)


def profile_tables(diagnostics: dict[str, dict[str, Any]]) -> list[tuple[str, list[str], list[list[str]]]]:
    """``(caption, header, rows)`` for each distinct run-start off-policy profile among the runs'
    ``diagnostics.json`` (runs that started from the same model on the same pairs share one table), and
    a caption for each run whose profile was skipped."""
    from opct.diagnostics.offpolicy import table_rows

    shared: dict[str, list[str]] = {}
    measured: dict[str, dict[str, Any]] = {}
    out: list[tuple[str, list[str], list[list[str]]]] = []
    for key, d in sorted(diagnostics.items()):
        if "axes" in d:
            identity = repr({k: v for k, v in d.items() if k != "seconds"})
            shared.setdefault(identity, []).append(key)
            measured.setdefault(identity, d)
        elif "skipped" in d:
            out.append((f"{key}: no off-policy profile ({d['skipped']}).", [], []))
    for identity, keys in shared.items():
        d = measured[identity]
        caption = (f"Measured at the start of {', '.join(keys)}: {d.get('pairs_per_axis')} training pairs per axis "
                   f"(a seeded sample), answers up to {d.get('max_new_tokens')} tokens, "
                   f"{d.get('samples_per_pair', 1)} own sample(s) per pair.")
        header, rows = table_rows(d)
        out.insert(0, (caption, header, rows))
    return out
