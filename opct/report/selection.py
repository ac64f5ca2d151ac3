"""The selection table: every candidate recipe with its validation numbers, and each rule's pick."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.table import Table


def _fmt(value: float, digits: int = 3) -> str:
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
        rows.append({"id": c["id"], "method": c["method"], "recipe": _recipe(c["recipe"]), "step": step,
                     "val_teacher_kl": m["val_teacher_kl"], "val_good": m["val_good"],
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
                f"val teacher-KL {_fmt(choice['val_teacher_kl'])}, val good-behaviour {_fmt(choice['val_good'])}"
            )
    return lines


def selection_markdown(selection: dict[str, Any], methods: Sequence[str] | None = None) -> str:
    """The selection table and the picks, as Markdown (the candidates and picks of ``methods`` only, when given)."""
    head = "| candidate | recipe | best step (KL) | val teacher-KL | val good-behaviour | eligible steps | train s |"
    lines = ["## Recipe selection (validation split)", "",
             f"Rules (fixed before any held-out number): {selection['rules']['eligible']}; "
             f"teacher_kl: {selection['rules']['teacher_kl']}; good_behaviour: {selection['rules']['good_behaviour']}. "
             f"Seeds {selection['seeds']}, {selection['steps']} steps measured every {selection['every']}, "
             f"{selection['pairs_per_step']} pairs per step; candidates per method: {selection['budget']}.", "",
             head, "|---|---|---|---|---|---|---|"]
    for r in best_rows(selection):
        if methods is not None and r["method"] not in methods:
            continue
        lines.append(f"| {r['id']} | {r['recipe']} | {r['step']} | {_fmt(r['val_teacher_kl'])} | {_fmt(r['val_good'])} "
                     f"| {r['eligible_steps']} | {r['seconds']:.0f} |")
    lines += ["", *[f"- {line}" for line in chosen_lines(selection, methods)], ""]
    return "\n".join(lines)


def selection_table(selection: dict[str, Any]) -> Table:
    """The same table for the terminal."""
    table = Table(title="recipe selection (validation)", title_justify="left")
    for name in ("candidate", "recipe", "step", "val KL", "val good", "eligible"):
        table.add_column(name, overflow="fold")
    for r in best_rows(selection):
        table.add_row(r["id"], r["recipe"], str(r["step"]), _fmt(r["val_teacher_kl"]), _fmt(r["val_good"]), r["eligible_steps"])
    return table


RECIPE_HEADERS = ["method", "lr", "steps", "pairs/step", "divergence", "samples (n, T)", "chosen by"]


def recipe_rows(plan: dict[str, Any], selection: dict[str, Any]) -> list[list[str]]:
    """One row per trained run of an experiment: the recipe it trained with and what chose it."""
    rule = plan.get("selection_rule")
    rows = []
    for key, r in (plan.get("recipes") or {}).items():
        method = key.split("-")[0]
        chosen = f"opct select ({rule} rule)" if rule and method in selection.get("chosen", {}) else "the experiment file"
        samples = f"{r['n']}, {r['temperature']:g}" if "n" in r else "—"
        rows.append([key, f"{r['lr']:g}", str(r["steps"]), str(r["pairs_per_step"]), str(r.get("loss", "—")), samples, chosen])
    return rows


def off_policy_lines(diagnostics: dict[str, dict[str, Any]]) -> list[str]:
    """How far each run's SFT targets were from the run-start student's own samples (BCT's diagnostics)."""
    lines = []
    for key, d in sorted(diagnostics.items()):
        if "target_nll_per_token" in d:
            lines.append(
                f"{key}: the run-start student's NLL of its SFT targets is {d['target_nll_per_token']:.3f} nats/token, "
                f"of its own samples {d['own_sample_nll_per_token']:.3f} (gap {d['gap']:+.3f}, {d['pairs']} pairs): "
                + ("the targets are nearly on-policy, so SFT and on-policy training see almost the same data."
                   if d["gap"] < 0.1 else "the targets are off-policy for the student.")
            )
    return lines
