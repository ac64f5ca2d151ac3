"""The report's comparisons between models: an ablation's variants against its reference, the paired
differences between methods on shared units, and the adaptive attacker against each model."""

from __future__ import annotations

from markupsafe import Markup

from opct.report.ablation import HOWTO as ABLATION_HOWTO
from opct.report.ablation import ablation_rows, ablation_table, is_ablation, largest_moves
from opct.report.experiment import Experiment
from opct.report.html_parts import simple_table, transposed_tables
from opct.report.paired import HOWTO as PAIRED_HOWTO
from opct.report.paired import paired_table
from opct.report.section import Ablation, ReportInputs, SectionData, render_template
from opct.report.table import MISSING, format_metric, method_label, render_markdown


def ablation_parts(exp: Experiment) -> Ablation | None:
    """The ablation section's table and largest moves, or None when the experiment is not an ablation."""
    if not is_ablation(exp):
        return None
    rows = ablation_rows(exp)
    return (*ablation_table(rows), largest_moves(rows))


class AblationSection:
    """Each variant minus the reference, pooled over its seeds, and the largest resolved move per metric."""

    name, order = "ablation", 50

    def data(self, report: ReportInputs) -> SectionData | None:
        ablation = report.ablation or ablation_parts(report.exp)
        return {"headers": ablation[0], "rows": ablation[1], "moves": ablation[2]} if ablation else None

    def markdown(self, data: SectionData) -> str:
        out = ["## Ablation: each variant minus the reference", "", ABLATION_HOWTO, "", render_markdown(data["headers"], data["rows"]), ""]
        out += ["Largest resolved move per metric:", "", *(f"- {line}" for line in data["moves"]), ""] if data["moves"] else []
        return "\n".join(out)

    def html(self, data: SectionData) -> Markup:
        return render_template("sections/ablation.html.jinja", {
            "howto": ABLATION_HOWTO, "tables": transposed_tables(data["headers"], data["rows"]), "moves": data["moves"]})


class PairedSection:
    """The paired difference between every two methods in every column that has a paired reader."""

    name, order = "paired", 60

    def data(self, report: ReportInputs) -> SectionData | None:
        headers, rows = report.paired or paired_table(report.exp, report.table.columns, report.differences)
        return {"headers": headers, "rows": rows} if rows else None

    def markdown(self, data: SectionData) -> str:
        return "\n".join(["## Paired differences between methods", "", PAIRED_HOWTO, "",
                          render_markdown(data["headers"], data["rows"]), ""])

    def html(self, data: SectionData) -> Markup:
        return render_template("sections/paired.html.jinja", {
            "howto": PAIRED_HOWTO, "tables": transposed_tables(data["headers"], data["rows"], "metric")})


ATTACK_HEADERS = ["method", "defense vs adaptive attacker", "cracked by one static wrapper",
                  "search cracked of those", "search cracked, no single wrapper does", "median queries to crack"]
ATTACK_HOWTO = (
    "The adaptive per-target attacker searched for a jailbreak of every held-out behaviour within the same "
    "query budget against each model. The static baseline tries every single wrapper template once; the "
    "search is expected to find what those find and compositions they miss. Every cracking prompt is in "
    "attack/<method>/successes.jsonl."
)


def attack_howto(exp: Experiment) -> str:
    """:data:`ATTACK_HOWTO`, saying so when no attacked model has the static baseline; another attacker than the
    search (``attack.strategy``) is named instead."""
    others = sorted({str(res["attacker"]) for res in exp.attack.values() if res and res.get("attacker", "search") != "search"})
    if others:
        return (f"The `{'`, `'.join(others)}` attacker (`attack.strategy`) attacked every held-out behaviour with the same "
                "settings against each model. Every query is in attack/<method>/attempts.jsonl, every cracking prompt in "
                "attack/<method>/successes.jsonl.")
    if any(res and res.get("static") for res in exp.attack.values()):
        return ATTACK_HOWTO
    return ATTACK_HOWTO + (" The static baseline was not run here (`attack.static_baseline: false`), so its "
                           "three columns show —.")


def attack_rows(exp: Experiment) -> list[list[str]]:
    """One row per attacked method: defense success, the static baseline and what the search added."""
    rows = []
    for method in exp.methods:
        res = exp.attack.get(method)
        if not res:
            continue
        static = res.get("static", {})
        n = static.get("n", res.get("n", 0))
        beyond = static.get("search_beyond_static")
        rows.append([
            method_label(method),
            format_metric(exp.attack_metric(method, "dsr")),
            f"{static['static_cracked']}/{n}" if static else MISSING,
            f"{static['search_cracked_of_static']}/{static['static_cracked']}" if static else MISSING,
            str(len(beyond)) if beyond is not None else MISSING,
            str(res.get("queries_to_crack", {}).get("median") or MISSING),
        ])
    return rows


class AttackSection:
    """What the adaptive attacker cracked per model, against the static baseline (left out when none ran)."""

    name, order = "attack", 70

    def data(self, report: ReportInputs) -> SectionData | None:
        rows = attack_rows(report.exp)
        return {"howto": attack_howto(report.exp), "rows": rows} if rows else None

    def markdown(self, data: SectionData) -> str:
        return "\n".join(["## Adaptive attacker", "", data["howto"], "", render_markdown(ATTACK_HEADERS, data["rows"]), ""])

    def html(self, data: SectionData) -> Markup:
        return render_template("sections/attack.html.jinja", {
            "howto": data["howto"], "attack_table": simple_table(ATTACK_HEADERS, data["rows"], "wrap")})


ABLATION_SECTION = AblationSection()
PAIRED_SECTION = PairedSection()
ATTACK_SECTION = AttackSection()
