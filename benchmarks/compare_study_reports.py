"""Whether a study run again reproduces a committed one: compare two study reports' per-family tables cell by
cell (the columns both have), and list every cell that differs.

    python benchmarks/compare_study_reports.py OLD_REPORT.md NEW_REPORT.md [--skip METRIC ...] [--json OUT]

A study report's "Per family" section has one table per family (``### <family> (<model>): ...``), one row per
metric and one column per method (``base``, ``BCT``, ``OPCT``, ...), each cell the mean over seeds with the
seeds' min–max and the unscored counts. Rows whose metric starts with a ``--skip`` prefix are left out
(say why where the result is published: a judge that changed version, for example). Exit 0 when every
compared cell is equal, 1 when any differs, 2 for a file without per-family tables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_FAMILY = re.compile(r"^### (\S+) \(")


def family_tables(text: str) -> dict[str, dict[str, dict[str, str]]]:
    """``{family: {metric: {column: cell}}}`` from a study report's per-family tables."""
    tables: dict[str, dict[str, dict[str, str]]] = {}
    family, header = None, None
    for line in text.splitlines():
        found = _FAMILY.match(line)
        if found:
            family, header = found.group(1), None
            continue
        if line.startswith("## "):
            family, header = None, None
            continue
        if family is None or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not set(line) <= set("|-: "):
            tables.setdefault(family, {})[cells[0]] = dict(zip(header[1:], cells[1:], strict=False))
    return tables


def compare(old: str, new: str, skip: Sequence[str] = ()) -> dict[str, Any]:
    """Every (family, metric, column) both reports have, minus ``skip``'s rows: the equal count and the differing
    cells, each with both texts."""
    a, b = family_tables(old), family_tables(new)
    equal, differ = 0, []
    for family in sorted(set(a) & set(b)):
        for metric in a[family]:
            if metric not in b[family] or any(metric.startswith(s) for s in skip):
                continue
            for column, cell in a[family][metric].items():
                if column not in b[family][metric]:
                    continue
                if cell == b[family][metric][column]:
                    equal += 1
                else:
                    differ.append({"family": family, "metric": metric, "column": column, "old": cell,
                                   "new": b[family][metric][column]})
    return {"families": sorted(set(a) & set(b)), "equal": equal, "differ": differ, "skipped": list(skip)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the committed study report (report.md)")
    parser.add_argument("new", type=Path, help="the report of the study run again")
    parser.add_argument("--skip", action="append", default=[], help="leave out rows whose metric starts with this")
    parser.add_argument("--json", type=Path, default=None, help="write the comparison as JSON here")
    args = parser.parse_args(argv)
    old, new = args.old.read_text(encoding="utf-8"), args.new.read_text(encoding="utf-8")
    for path, text in ((args.old, old), (args.new, new)):
        if not family_tables(text):
            print(f"error: {path}: no per-family tables ('### <family> (' sections with a table)", file=sys.stderr)
            return 2
    result = compare(old, new, args.skip)
    print(f"families compared: {', '.join(result['families']) or 'none'}; cells equal: {result['equal']}; "
          f"differ: {len(result['differ'])}")
    for d in result["differ"]:
        print(f"  {d['family']} | {d['metric']} | {d['column']}: {d['old']!r} -> {d['new']!r}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if not result["differ"] and result["families"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
