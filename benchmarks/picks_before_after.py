r"""Two selections of one family side by side: each method's pick under each rule, as the first selection made it
and as a later one (docs/mechanism.md, amendment (a): w16-long.llama selected again under the eligibility rule).

    python benchmarks/picks_before_after.py FIRST.json SECOND.json [--labels FIRST_LABEL SECOND_LABEL]
        [--md OUT.md] [--json OUT.json]

Both files are ``selection.json`` files of ``opct-lab select``. Per method and rule, each side shows the pick
(candidate, step, recipe), its validation teacher-KL, its family score (family_transfer's criterion) and its
validation attack's defended rate; a line above the table gives each file's base validation teacher-KL (the
bound of amendment (a)'s second condition) and its eligibility rule. It reads the files and writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from opct.report.selection import fmt_value, pick_text
from opct.report.table import render_markdown

#: The columns of one side of the table.
SIDE_COLUMNS = ("pick", "val teacher-KL", "family score", "attack defended")


def pick_cells(choice: dict[str, Any] | None) -> list[str]:
    """One side's cells for a pick; a rule with no eligible recipe reads ``none eligible``."""
    if not choice:
        return ["none eligible", "—", "—", "—"]
    attack = choice.get("family_attack") or {}
    return [pick_text(choice), fmt_value(choice.get("val_teacher_kl")), fmt_value(choice.get("family_score")),
            fmt_value(attack.get("defended_rate"))]


def compare(first: dict[str, Any], second: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (method, rule) in either file, in the first file's order then the second's: both sides' cells
    and whether the pick (candidate and step) changed."""
    rows = []
    keys = [(m, r) for m, by_rule in first["chosen"].items() for r in by_rule]
    keys += [(m, r) for m, by_rule in second["chosen"].items() for r in by_rule if (m, r) not in keys]
    for method, rule in keys:
        a = (first["chosen"].get(method) or {}).get(rule)
        b = (second["chosen"].get(method) or {}).get(rule)
        same = bool(a) and bool(b) and (a["candidate"], a["step"]) == (b["candidate"], b["step"])
        rows.append({"method": method, "rule": rule, "first": pick_cells(a), "second": pick_cells(b), "changed": not same})
    return rows


def context_line(label: str, selection: dict[str, Any]) -> str:
    """What bounds a file's picks: its eligibility rule and its base model's validation teacher-KL."""
    base = (selection.get("base_validation") or {}).get("val_teacher_kl")
    return (f"{label}: eligibility `{selection.get('eligibility', 'protocol')}`; base model's validation "
            f"teacher-KL {fmt_value(base)}.")


def markdown(first: dict[str, Any], second: dict[str, Any], rows: list[dict[str, Any]], labels: tuple[str, str]) -> str:
    """The table of ``rows`` (:func:`compare`'s) and the two files' context lines, as Markdown."""
    headers = ["method", "rule", *(f"{labels[0]}: {c}" for c in SIDE_COLUMNS),
               *(f"{labels[1]}: {c}" for c in SIDE_COLUMNS), "pick changed"]
    cells = [[r["method"], r["rule"], *r["first"], *r["second"], "yes" if r["changed"] else "no"] for r in rows]
    return "\n".join([context_line(labels[0], first), "", context_line(labels[1], second), "",
                      render_markdown(headers, cells)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--labels", nargs=2, default=["first selection", "second selection"])
    parser.add_argument("--md", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    try:
        first, second = (json.loads(p.read_text(encoding="utf-8")) for p in (args.first, args.second))
        rows = compare(first, second)
        text = markdown(first, second, rows, tuple(args.labels))
    except (OSError, ValueError, KeyError) as err:
        print(f"picks_before_after: {err}", file=sys.stderr)
        return 2
    print(text)
    if args.md:
        args.md.write_text(text + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps({"labels": args.labels, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
