"""The study report: per-family tables, then OPCT − BCT pooled over families and seeds with a verdict.

``write_study_report(study_dir)`` reads ``study.json`` and every family's experiment directory
(:mod:`opct_lab.study.runner` for the layout) and writes ``report.json`` (every number: each run's metrics,
each family's summary over seeds, each pooled difference with its per-family and per-cell values)
and ``report.md`` from it; :func:`study_renderables` gives the same tables for an 80-column terminal
from the same data. Per family: base, and each trained method's mean over its seeds with the range
(min–max) of the seeds; a method with one run shows that run's interval and n.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from opct.evals.contract import Column
from opct.report.experiment import Experiment
from opct.report.load import load_experiment
from opct.report.metric import Metric
from opct.report.notices import warning_groups
from opct.report.pooled import (
    HOWTO,
    PAPER_PAIR,
    plan_seeds,
    pooled_record,
    pooled_rows,
    run_methods,
    split_run_key,
)
from opct.report.table import MISSING, build_columns, method_label, metric_parts, render_markdown
from opct.report.terminal import WIDTH, Cell, transposed_tables, verdict_renderables
from opct.report.verdict import SIDE_WORDS
from opct.runs.experiment_layout import REPORT_JSON, REPORT_MD
from opct.stats.estimate import DEFAULT_SEED
from opct.stats.paired import POOLED_PAIRED_BOOTSTRAP
from opct_lab.layout import STUDY_FILE
from opct_lab.report.levels import FIGURE, levels_data, levels_lines, levels_markdown, plot_dose_response
from opct_lab.report.razor import razor_data, razor_markdown

#: The bootstrap behind the pooled differences (recorded in report.json).
RESAMPLES = 2000


def load_study_dir(root: str | Path) -> tuple[dict[str, Any], dict[str, Experiment]]:
    """``study.json`` and ``{family: its experiment}`` (families whose folder is missing are left out)."""
    root = Path(root)
    path = root / STUDY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no study at {root} (no {STUDY_FILE})")
    study = json.loads(path.read_text(encoding="utf-8"))
    dirs = study.get("experiments") or {f: f for f in study.get("families", {})}
    return study, {family: load_experiment(root / d) for family, d in dirs.items() if (root / d).is_dir()}


def metric_record(metric: Metric | None) -> dict[str, Any] | None:
    """A run's metric as JSON (``None`` when absent)."""
    return None if metric is None else metric.to_dict()


def summarize(metrics: Sequence[Metric]) -> dict[str, Any] | None:
    """A method's metric over its runs (seeds): mean, min, max, the number of runs, unscored rows summed,
    incomplete if any run is; a single run keeps its interval and n."""
    if not metrics:
        return None
    values = [m.value for m in metrics]
    unscored: dict[str, int] = {}
    for m in metrics:
        for k, v in m.unscored.items():
            unscored[k] = unscored.get(k, 0) + v
    one = metrics[0] if len(metrics) == 1 else None
    return {"value": sum(values) / len(values), "min": min(values), "max": max(values), "runs": len(metrics),
            "ci_low": one.ci_low if one else None, "ci_high": one.ci_high if one else None, "n": one.n if one else None,
            "unscored": unscored, "incomplete": any(m.incomplete for m in metrics)}


def _family(exp: Experiment, model: str, columns: Sequence[Column]) -> dict[str, Any]:
    seeds = plan_seeds(exp)
    runs = {key: {c.key: metric_record(c.get(exp, key)) for c in columns} for key in exp.methods}
    methods = run_methods(exp)
    summary = {}
    for method in methods:
        keys = [k for k in exp.methods if split_run_key(k, seeds)[0] == method]
        summary[method] = {c.key: summarize([m for k in keys if (m := c.get(exp, k)) is not None]) for c in columns}
    return {"model": model, "experiment": exp.root.name, "seeds": seeds, "runs": runs, "summary": summary}


def trained_pairs(families: Mapping[str, Experiment]) -> list[tuple[str, str]]:
    """The pooled comparisons beside OPCT − BCT: every other trained method (ACT, a plugin's) minus BCT and
    minus OPCT, where the study trained those."""
    methods = [m for m in dict.fromkeys(m for exp in families.values() for m in run_methods(exp)) if m != "base"]
    treatment, baseline = PAPER_PAIR
    return [(m, other) for m in methods if m not in PAPER_PAIR for other in (baseline, treatment) if other in methods]


def _rule_run(exp: Experiment, method: str, rule: str) -> str | None:
    """The run that trained ``method`` on ``rule``'s pick in ``exp``: the method's own run where that pick is
    the experiment's own rule's (same recipe and steps), else the plan's variant trained on exactly that
    pick (one variant per distinct pick, as ``compare_rules`` plans them), or None where none was trained."""
    picks = exp.selection.get("chosen", {}).get(method, {})
    choice, own = picks.get(rule), picks.get(exp.plan.get("selection_rule"))
    if not choice:
        return None
    if own and (choice["recipe"], choice["step"]) == (own["recipe"], own["step"]):
        return method if method in run_methods(exp) else None
    wanted = {"method": method, "settings": {**choice["recipe"], "train.max_steps": choice["step"]}}
    return next((key for key, variant in exp.plan.get("variants", {}).items() if variant == wanted), None)


def rule_runs(families: Mapping[str, Experiment]) -> dict[str, dict[str, tuple[str | None, str | None]]]:
    """OPCT − BCT on each other selection rule's picks, where the study trained them (``compare_rules``):
    ``{rule: {family: (OPCT's run, BCT's run)}}``, each run as :func:`_rule_run` finds it (None leaves that
    side of the family out). A rule is listed when some family trained a variant for it."""
    rules = dict.fromkeys(rule for exp in families.values() for rule in exp.selection.get("rules", {}))
    runs = {rule: {family: (_rule_run(exp, PAPER_PAIR[0], rule), _rule_run(exp, PAPER_PAIR[1], rule))
                   for family, exp in families.items()} for rule in rules}
    return {rule: by_family for rule, by_family in runs.items()
            if any(run not in (None, *PAPER_PAIR) for pair in by_family.values() for run in pair)}


def _pair_title(pair: Sequence[str]) -> str:
    return f"{method_label(pair[0])} − {method_label(pair[1])}"


def study_data(root: str | Path, n_resamples: int = RESAMPLES) -> dict[str, Any]:
    """Everything the study report shows, as JSON-ready data (see the module docstring)."""
    study, families = load_study_dir(root)
    columns: dict[str, Column] = {}
    for exp in families.values():
        for c in build_columns(exp):
            columns.setdefault(c.key, c)
    models = study.get("families", {})
    rows = pooled_rows(families, n_resamples=n_resamples, seed=DEFAULT_SEED)
    others = [{"pair": list(pair), "pooled": [pooled_record(r) for r in pooled_rows(families, *pair, n_resamples=n_resamples,
                                                                              seed=DEFAULT_SEED)]}
              for pair in trained_pairs(families)]
    by_rule = [{"rule": rule, "runs": {f: list(r) for f, r in runs.items()},
                "pooled": [pooled_record(r) for r in pooled_rows(families, n_resamples=n_resamples, seed=DEFAULT_SEED,
                                                                  runs=runs)]}
               for rule, runs in rule_runs(families).items()]
    return {
        "study": study.get("name", Path(root).name), "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "families": models, "seeds": study.get("seeds", []), "comparison": list(PAPER_PAIR),
        "missing_families": [f for f in models if f not in families],
        "bootstrap": {"method": POOLED_PAIRED_BOOTSTRAP, "resamples": n_resamples, "seed": DEFAULT_SEED, "level": 0.95,
                      "resampled": "units (one draw shared by every (family, seed) cell) and seeds within each family; "
                                   "families fixed; pooled value = mean over families of the mean over seeds"},
        "metrics": [{"key": c.key, "header": c.header, "percent": c.percent, "better": c.better} for c in columns.values()],
        "per_family": {f: _family(exp, str(models.get(f, exp.model)), list(columns.values())) for f, exp in families.items()},
        "pooled": [pooled_record(r) for r in rows],
        "others": others,
        "by_rule": by_rule,
        "warnings": [f"{f}, {run}: {line}" for f, exp in families.items() for run, lines in warning_groups(exp) for line in lines],
        **({"dose_response": levels_data(root, study["levels"], families, n_resamples)} if study.get("levels") else {}),
        **({"razor": razor} if (razor := razor_data(families, n_resamples)) else {}),
    }


def write_study_report(root: str | Path) -> dict[str, Any]:
    """Write ``report.json`` and ``report.md`` into the study folder ``root``; returns the data."""
    root = Path(root)
    data = study_data(root)
    if "dose_response" in data:
        plot_dose_response(data["dose_response"], root / FIGURE)
    for name, text in ((REPORT_JSON, json.dumps(data, indent=2, ensure_ascii=False) + "\n"), (REPORT_MD, render_study_md(data))):
        tmp = root / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(root / name)
    return data


def read_study_report(root: str | Path) -> dict[str, Any]:
    """The data of a study's ``report.json``."""
    return json.loads((Path(root) / REPORT_JSON).read_text(encoding="utf-8"))


def summary_parts(summary: Mapping[str, Any] | None, percent: bool) -> Cell:
    """``("41.0%", "38.0–45.0", "(3 seeds; 4 unparsed)")`` (mean, the seeds' range) for several runs, a run's
    ``(value, interval, n)`` for one, ``("—",)`` for none; ``INCOMPLETE`` on a line of its own."""
    if summary is None:
        return (MISSING,)
    flag = "INCOMPLETE" if summary["incomplete"] else ""
    if summary["runs"] == 1:
        value, interval, n = metric_parts(Metric(summary["value"], summary["ci_low"], summary["ci_high"], summary["n"],
                                                 summary["unscored"]), percent)
        return value, interval, n, flag
    scale, digits, unit = (100.0, 1, "%") if percent else (1.0, 3, "")
    left_out = "".join(f"; {v} {k}" for k, v in summary["unscored"].items() if v)
    return (f"{summary['value'] * scale:.{digits}f}{unit}",
            f"{summary['min'] * scale:.{digits}f}–{summary['max'] * scale:.{digits}f}",
            f"({summary['runs']} seeds{left_out})", flag)


def _family_cells(data: Mapping[str, Any], family: str) -> tuple[list[str], list[str], list[list[Cell]]]:
    """Labels (metrics), headers (methods) and cells of one family's table."""
    fam = data["per_family"][family]
    methods = list(fam["summary"])
    metrics = [m for m in data["metrics"] if any(fam["summary"][x].get(m["key"]) for x in methods)]
    cells = [[summary_parts(fam["summary"][x].get(m["key"]), m["percent"]) for x in methods] for m in metrics]
    return [m["header"] for m in metrics], [method_label(x) for x in methods], cells


def _pooled_cells(row: Mapping[str, Any]) -> list[Cell]:
    value, interval = row["text"]["difference"]
    incomplete = f"INCOMPLETE: {len(row['incomplete'])} run(s)" if row["incomplete"] else ""
    side = SIDE_WORDS.get(row["paper_side"] or "", "")
    return [(value, interval, f"k={row['units']} units", f"{row['cells']} of {row['cells_planned']} cells"),
            tuple(row["text"]["unscored"].split("; ")),
            (f"paper: {side}" if side else "", row["verdict"], incomplete)]


POOLED_HEADERS = ["OPCT − BCT", "unscored", "verdict"]


def _title(data: Mapping[str, Any]) -> str:
    fams = data["families"]
    trained = [*PAPER_PAIR, *(o["pair"][0] for o in data.get("others", []))]
    names = " vs ".join(method_label(m) for m in dict.fromkeys(trained))
    return (f"{data['study']}: {names}, {len(fams)} famil{'y' if len(fams) == 1 else 'ies'} × "
            f"{len(data['seeds'])} seed(s)")


def _family_title(data: Mapping[str, Any], family: str) -> str:
    return (f"{family} ({data['per_family'][family]['model']}): base; each trained method: mean over seeds, "
            "min–max of the seeds")


def _pooled_md_cells(row: Mapping[str, Any]) -> list[str]:
    """A pooled row's difference, interval, units, cells, unscored counts and verdict, as Markdown cells."""
    incomplete = f" (INCOMPLETE evals: {', '.join(row['incomplete'])})" if row["incomplete"] else ""
    return [*row["text"]["difference"], str(row["units"]), f"{row['cells']} of {row['cells_planned']}",
            row["text"]["unscored"], row["verdict"] + incomplete]


def render_study_md(data: Mapping[str, Any]) -> str:
    """``report.md`` of a study."""
    out = [f"# {_title(data)}", "", f"Generated {data['generated']}. Families: "
           + ", ".join(f"{f} (`{m}`)" for f, m in data["families"].items()) + f"; seeds {', '.join(map(str, data['seeds']))}.", ""]
    if data["missing_families"]:
        out += [f"**Not run yet:** {', '.join(data['missing_families'])}.", ""]
    out += ["## Per family", ""]
    for family, fam in data["per_family"].items():
        labels, headers, cells = _family_cells(data, family)
        out += [f"### {_family_title(data, family)}", "",
                f"Each run with its interval and n: [{fam['experiment']}/{REPORT_MD}]({fam['experiment']}/{REPORT_MD}).", "",
                render_markdown(["metric", *headers], [[label, *(" ".join(p for p in c if p) for c in row)]
                                                       for label, row in zip(labels, cells, strict=True)]), ""]
    out += ["## OPCT − BCT, pooled over families and seeds", "", HOWTO, ""]
    out += [_paper_pair_md(data["pooled"]), ""]
    for other in data.get("by_rule", []):
        out += [f"## OPCT − BCT on the {other['rule']} rule's picks, pooled over families and seeds", "",
                RULE_NOTE + " Runs: " + "; ".join(f"{f}: {a or 'none'} − {b or 'none'}"
                                                   for f, (a, b) in other["runs"].items()) + ".", ""]
        out += [_paper_pair_md(other["pooled"]), ""]
    for other in data.get("others", []):
        title = _pair_title(other["pair"])
        out += [f"## {title}, pooled over families and seeds", "",
                "The same pooling as OPCT − BCT; the paper makes no claim about this pair, so the verdict only "
                "says on which side of 0 the interval lies.", ""]
        rows = [[r["header"], *_pooled_md_cells(r)] for r in other["pooled"]]
        out += [render_markdown(["metric", title, "95% interval", "units k", "cells", "unscored", "verdict"], rows), ""]
    if "dose_response" in data:
        out += [levels_markdown(data["dose_response"])]
    if "razor" in data:
        out += [razor_markdown(data["razor"])]
    if data["warnings"]:
        out += ["## Warnings", "", *(f"- {w}" for w in data["warnings"]), ""]
    out.append(scale_note(data))
    return "\n".join(out) + "\n"


def _paper_pair_md(pooled: Sequence[Mapping[str, Any]]) -> str:
    """An OPCT − BCT table (pooled records, with the paper's claim and the verdict) as Markdown."""
    rows = [[r["header"], r["claim"] or "—", *_pooled_md_cells(r)] for r in pooled]
    return render_markdown(["metric", "paper's claim", "OPCT − BCT", "95% interval", "units k", "cells", "unscored",
                            "verdict"], rows)


RULE_NOTE = ("The same pooling and verdict as OPCT − BCT, with each method trained on the picks of another "
             "selection rule (`--compare-rules`): the variant trained on that rule's pick, or the method's own run "
             "where that rule picked the same recipe.")


def scale_note(data: Mapping[str, Any]) -> str:
    """How to compare the study's numbers with the paper's."""
    models = ", ".join(dict.fromkeys(str(m) for m in data["families"].values()))
    return (f"Measured on {models}, not the paper's 4–30B models: compare the direction of the effects with the "
            "paper's, not their size.")


def study_renderables(data: Mapping[str, Any], width: int = WIDTH) -> list[RenderableType]:
    """The study's tables for the terminal, each fitting ``width``: one per family, then the pooled differences."""
    out: list[RenderableType] = [Text(_title(data), style="bold")]
    for family in data["per_family"]:
        labels, headers, cells = _family_cells(data, family)
        out += transposed_tables(_family_title(data, family), "metric", labels, headers, cells, width)
    if data["missing_families"]:
        out.append(Text(f"not run yet: {', '.join(data['missing_families'])}"))
    pooled = data["pooled"]
    if pooled:
        out += transposed_tables("OPCT − BCT pooled over families and seeds (95% bootstrap over seeds and units)",
                                 "metric", [r["header"] for r in pooled], POOLED_HEADERS,
                                 [_pooled_cells(r) for r in pooled], width, justify="left")
    for other in data.get("by_rule", []):
        out += transposed_tables(f"OPCT − BCT on the {other['rule']} rule's picks, pooled", "metric",
                                 [r["header"] for r in other["pooled"]], POOLED_HEADERS,
                                 [_pooled_cells(r) for r in other["pooled"]], width, justify="left")
    for other in data.get("others", []):
        title = _pair_title(other["pair"])
        out += transposed_tables(f"{title} pooled over families and seeds (no claim in the paper)", "metric",
                                 [r["header"] for r in other["pooled"]], [title, "unscored", "verdict"],
                                 [_pooled_cells(r) for r in other["pooled"]], width, justify="left")
    if "dose_response" in data:
        out.append(Text("\n".join(levels_lines(data["dose_response"]))))
    out.append(Text(scale_note(data)))
    return out + verdict_renderables([pooled_sentence(r) for r in pooled], width)


def pooled_sentence(row: Mapping[str, Any]) -> str:
    """One pooled OPCT − BCT row as a verdict line (the form of :meth:`opct.report.verdict.VerdictLine.sentence`)."""
    side = f"paper {SIDE_WORDS.get(row['paper_side'] or '', 'no claim')}"
    incomplete = f" INCOMPLETE ({len(row['incomplete'])} run(s))" if row["incomplete"] else ""
    value, interval = row["text"]["difference"]
    return (f"{row['header']}: {side}; OPCT − BCT {value} {interval} (k={row['units']}){incomplete}: {row['verdict']}"
            f"{before_amendment_note(row)}.")


def before_amendment_note(row: Mapping[str, Any]) -> str:
    """``" (before the amendment of 2026-12-07: [−4.8, −1.6], not shown)"``: a "no worse" row's interval and
    verdict as first registered (docs/metrics.md), when either differs from the row's own; ``""`` otherwise."""
    before = row.get("before_amendment")
    if not before or before.get("verdict") is None:
        return ""
    if (before["ci_low"], before["ci_high"], before["verdict"]) == (row["ci_low"], row["ci_high"], row["verdict"]):
        return ""
    scale, digits = (100.0, 1) if row.get("percent") else (1.0, 3)
    return (f" (before the amendment of {before['date']}: [{before['ci_low'] * scale:+.{digits}f}, "
            f"{before['ci_high'] * scale:+.{digits}f}], {before['verdict']})")


def study_group(root: str | Path, width: int = WIDTH) -> Group:
    """:func:`study_renderables` of a study's ``report.json``, as one renderable for ``console.print``."""
    return Group(*study_renderables(read_study_report(root), width))
