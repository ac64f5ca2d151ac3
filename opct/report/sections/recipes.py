"""How the methods trained: each method's recipe and the selection that chose it, and the runs' off-policy
profile (how far BCT's targets are from the student's own behaviour at the start of training)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from opct.report.experiment import Experiment
from opct.report.html_parts import simple_table
from opct.report.pooled import run_methods
from opct.report.section import ReportInputs, SectionData, render_template
from opct.report.selection import (
    PROFILE_HOWTO,
    RECIPE_HEADERS,
    best_rows,
    chosen_lines,
    family_lines,
    fmt_value,
    held_back_line,
    picks_table,
    profile_tables,
    recipe_rows,
    selection_markdown,
)
from opct.report.table import render_markdown

RECIPES_HOWTO = (
    "Each method trains with its own recipe. When the experiment names a selection, the recipes were chosen by "
    "`opct-lab select` on the validation split (held back from the training families; held-out data never enters), "
    "by the rule named in the last column; the selection table below shows every candidate."
)


def selection_data(exp: Experiment) -> dict[str, Any] | None:
    """The selection table, the candidates of the methods this experiment ran only, and the picks."""
    methods = run_methods(exp)  # a run's method, without its seed
    sel = [r for r in best_rows(exp.selection) if r["method"] in methods]
    if not sel:
        return None
    candidates = simple_table(
        ["candidate", "recipe", "best step (KL)", "val teacher-KL", "val good-behaviour", "famval good-behaviour",
         "best family score (step)", "eligible steps"],
        [[r["id"], r["recipe"], str(r["step"]), f"{r['val_teacher_kl']:.3f}", f"{r['val_good']:.3f}",
          fmt_value(r["famval_good"]), r["family_score"], r["eligible_steps"]] for r in sel], "wrap")
    return {"family_lines": family_lines(exp.selection), "candidates": candidates,
            "picks": simple_table(*picks_table(exp.selection, methods), "wrap"),
            "chosen_lines": chosen_lines(exp.selection, methods)}


class RecipesSection:
    """Each method's recipe, the held-back families, and the selection behind them when there was one."""

    name, order = "recipes", 30

    def data(self, report: ReportInputs) -> SectionData | None:
        exp = report.exp
        recipes = recipe_rows(exp.plan, exp.selection)
        return {"exp": exp, "rows": recipes, "held": held_back_line(exp.plan)} if recipes else None

    def markdown(self, data: SectionData) -> str:
        exp: Experiment = data["exp"]
        out = ["## Recipes", "", RECIPES_HOWTO, "", render_markdown(RECIPE_HEADERS, data["rows"]), ""]
        if data["held"]:
            out += [f"*{data['held']}*", ""]
        if exp.selection:
            out += [selection_markdown(exp.selection, run_methods(exp)).replace("## Recipe selection", "### Recipe selection"), ""]
        return "\n".join(out)

    def html(self, data: SectionData) -> Markup:
        exp: Experiment = data["exp"]
        return render_template("sections/recipes.html.jinja", {
            "howto": RECIPES_HOWTO, "recipe_table": simple_table(RECIPE_HEADERS, data["rows"], "wrap"), "held": data["held"],
            "selection": selection_data(exp) if exp.selection else None})


class ProfileSection:
    """The off-policy profile each run measured at its start (left out when none did)."""

    name, order = "profile", 40

    def data(self, report: ReportInputs) -> SectionData | None:
        profiles = profile_tables(report.exp.diagnostics)
        return {"profiles": profiles} if profiles else None

    def markdown(self, data: SectionData) -> str:
        out = ["## Off-policy profile", "", PROFILE_HOWTO, ""]
        out += [x for cap, head, rows in data["profiles"] for x in (f"*{cap}*", "", render_markdown(head, rows) if rows else "", "")]
        return "\n".join(out)

    def html(self, data: SectionData) -> Markup:
        return render_template("sections/profile.html.jinja", {
            "profiles": [(cap, simple_table(head, rows, "wrap") if rows else None) for cap, head, rows in data["profiles"]],
            "profile_howto": PROFILE_HOWTO})


RECIPES_SECTION = RecipesSection()
PROFILE_SECTION = ProfileSection()
