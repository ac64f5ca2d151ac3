"""The dose-response study's trend test read three ways, side by side (docs/mechanism.md, amendment (a)): as
published (the study report's table), from a re-run's trend inputs, and from those inputs with one level
replaced by another run's (the amended reading).

    python benchmarks/trend_readings_table.py PUBLISHED_REPORT.md INPUTS.json[.gz] [--replace LEVEL OTHER.json[.gz]]
        [--label TEXT] [--md OUT.md] [--json OUT.json]

``PUBLISHED_REPORT.md`` is a study's report.md (its trend table and its ``**Hypothesis: …**`` line are read).
``INPUTS`` and ``OTHER`` are files of ``benchmarks/trend_inputs.py export``. Prints, and writes with ``--md``,
two tables: every metric's β with its intervals and readings under each reading, then each level's pooled
OPCT − BCT (the replaced level under both its runs). ``--label`` names the replacing run in the column headers
(default ``replaced``: ``re-run, LEVEL replaced`` and ``LEVEL (replaced)``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trend_inputs import load  # beside this file

from opct.report.table import render_markdown
from opct_lab.report.levels import TREND_COLUMNS, format_interval, format_value, trend_cells
from opct_lab.report.trend_inputs import replace_level, trends_from_inputs

#: The first cells of a study report's trend table's header row.
TREND_HEADER = ("metric", *TREND_COLUMNS)
#: A reading's fields per metric, in :data:`~opct_lab.report.levels.TREND_COLUMNS`' order.
FIELDS = ("paper_side", "beta", "ci", "ci_bonferroni", "reading", "reading_bonferroni")
HYPOTHESIS = re.compile(r"^\*\*Hypothesis: (.+?)\.\*\*\s*$", re.MULTILINE)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def published_reading(markdown: str) -> dict[str, Any]:
    """A study report's trend table (per metric header: β, its two intervals and readings, as written) and its
    hypothesis's outcome. A report without them is a ValueError."""
    lines = markdown.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")
                  and tuple(_cells(line)[:len(TREND_HEADER)]) == TREND_HEADER), None)
    hypothesis = HYPOTHESIS.search(markdown)
    if start is None or hypothesis is None:
        raise ValueError("no trend table and hypothesis line (a study report's dose-response section) found")
    trends = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        header, *cells = _cells(line)[:len(TREND_HEADER)]
        trends[header] = dict(zip(FIELDS, cells, strict=True))
    return {"trends": trends, "hypothesis": hypothesis.group(1)}


def computed_reading(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The trend test from ``inputs``, written as the report writes it, keyed by metric header."""
    result = trends_from_inputs(inputs)
    trends = {t["header"]: dict(zip(FIELDS, trend_cells({**t, "percent": bool(t["percent"])}), strict=True))
              for t in result["trends"].values()}
    return {"trends": trends, "hypothesis": result["hypothesis"]["outcome"],
            "reasons": result["hypothesis"]["reasons"]}


def _cell(t: Mapping[str, str] | None) -> str:
    if t is None:
        return "—"
    return f"{t['beta']} {t['ci']}; 98.33% {t['ci_bonferroni']}: {t['reading']} / {t['reading_bonferroni']}"


def readings_table(readings: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per metric (in the first reading's order, then any only the later ones have), one column per
    reading: β, its 95% and 98.33% intervals and the two readings; the hypothesis's outcome last."""
    headers: list[str] = []
    sides: dict[str, str] = {}
    for reading in readings.values():
        for header, t in reading["trends"].items():
            if header not in headers:
                headers.append(header)
            sides.setdefault(header, t["paper_side"])
    rows = [[h, sides[h], *(_cell(r["trends"].get(h)) for r in readings.values())] for h in headers]
    rows.append(["**hypothesis**", "", *(f"**{r['hypothesis']}**" for r in readings.values())])
    return render_markdown(["metric", "paper's side", *(f"{label}: β [95%]; 98.33%: reading (95%) / (98.33%)"
                                                          for label in readings)], rows)


def _difference(rec: Mapping[str, Any] | None) -> str:
    if rec is None:
        return "—"
    est, percent = rec["estimate"], bool(rec.get("percent"))
    mark = " INCOMPLETE" if rec["incomplete"] else ""
    return f"{format_value(est['value'], percent)} {format_interval([est['ci_low'], est['ci_high']], percent)}{mark}"


def levels_table(inputs: Mapping[str, Any], level: str | None = None, other: Mapping[str, Any] | None = None,
                 other_label: str = "replaced") -> str:
    """Each level's pooled OPCT − BCT per metric (95%; INCOMPLETE where a level's evals are), with ``level`` from
    ``other`` in a column of its own beside its entry in ``inputs``."""
    columns = [(lv["level"], lv) for lv in inputs["levels"]]
    if level is not None and other is not None:  # the level is in both (replace_level checked it)
        new = next(lv for lv in other["levels"] if lv["level"] == level)
        columns.append((f"{level} ({other_label})", new))
    headers: dict[str, str] = {}
    for _, lv in columns:
        for key, rec in lv["metrics"].items():
            headers.setdefault(key, rec["header"])
    doses = ["dose (nats)", *("—" if lv["dose"] is None else f"{lv['dose']['value']:+.3f}" for _, lv in columns)]
    rows = [[headers[key], *(_difference(lv["metrics"].get(key)) for _, lv in columns)] for key in headers]
    return render_markdown(["metric", *(name for name, _ in columns)], [doses, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("published", type=Path, help="the study's report.md as published")
    parser.add_argument("inputs", type=Path, help="a re-run's trend inputs (trend_inputs.py export)")
    parser.add_argument("--replace", nargs=2, metavar=("LEVEL", "OTHER"), default=None)
    parser.add_argument("--label", default="replaced",
                        help="what the replacing run is, in its column names (default: replaced)")
    parser.add_argument("--md", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        published = published_reading(args.published.read_text(encoding="utf-8"))
        inputs = load(args.inputs)
        readings = {"published": published, "re-run": computed_reading(inputs)}
        other = None
        if args.replace:
            level, path = args.replace
            other = load(Path(path))
            readings[f"re-run, {level} {args.label}"] = computed_reading(replace_level(inputs, other, level))
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    level = args.replace[0] if args.replace else None
    text = "\n".join([readings_table(readings), "", "OPCT − BCT per level (pooled over its families and seeds, 95%):",
                      "", levels_table(inputs, level, other, args.label), ""])
    print(text)
    if args.md:
        args.md.write_text(text, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(readings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
