"""The pre-registered contrasts of the sharpness study (docs/sharpness.md) from its experiment folder.

``python benchmarks/sharpness_contrasts.py runs/experiments/organism-sharpness [--json OUT]`` prints, per
contrast and per results column, the difference ``a − b`` pooled over the seeds both were trained with,
paired on the units both were evaluated on, with the clustered bootstrap interval the report uses
(:func:`opct.report.pooled.pooled_rows`), its cells and the unscored rows left out. The contrasts and
their order were fixed before any result of the study existed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from opct.report.load import load_experiment
from opct.report.pooled import difference_parts, plan_seeds, pooled_rows, split_run_key, unscored_text

#: (a, b, what the contrast asks), in the pre-registered order: the two primary contrasts first.
CONTRASTS: tuple[tuple[str, str, str], ...] = (
    ("opct-sharp", "opct", "primary: does a sharper teacher move OPCT toward BCT?"),
    ("bct-sampled", "bct", "primary: do softer targets move BCT toward OPCT?"),
    ("bct", "opct", "the verdict, on this experiment's seeds"),
    ("opct-sharp", "bct", "secondary: what is left of the gap with a sharp teacher"),
    ("bct-sampled", "opct", "secondary: what is left of the gap with soft BCT targets"),
)


def contrast_rows(root: Path) -> list[dict[str, object]]:
    """One dict per (contrast, column): the pair, the column, the difference and interval as printed,
    the raw estimate, the cells measured of those expected, and the unscored rows."""
    exp = load_experiment(root)
    seeds = plan_seeds(exp)
    trained = {split_run_key(key, seeds)[0] for key in exp.plan.get("methods", [])}
    out: list[dict[str, object]] = []
    for a, b, question in CONTRASTS:
        if not {a, b} <= trained:
            continue
        for row in pooled_rows({exp.name: exp}, a, b):
            est = row.difference.estimate
            value, interval = difference_parts(row)
            out.append({"a": a, "b": b, "question": question, "column": row.column.header,
                        "better": row.column.better, "value": value, "interval": interval,
                        "estimate": est.value, "ci_low": est.ci_low, "ci_high": est.ci_high,
                        "cells": row.difference.cells, "expected_cells": row.expected_cells,
                        "unscored": unscored_text(row), "incomplete": list(row.incomplete)})
    return out


def markdown(rows: list[dict[str, object]]) -> str:
    """The rows as one Markdown table per contrast."""
    lines: list[str] = []
    seen: set[tuple[object, object]] = set()
    for r in rows:
        if (r["a"], r["b"]) not in seen:
            seen.add((r["a"], r["b"]))
            lines += ["", f"### {r['a']} − {r['b']} ({r['question']})", "",
                      "| metric (better) | difference | 95% interval | cells | unscored |", "|---|---|---|---|---|"]
        lines.append(f"| {r['column']} ({r['better']}) | {r['value']} | {r['interval']} | "
                     f"{r['cells']} of {r['expected_cells']} | {r['unscored'] or '—'} |")
    return "\n".join(lines).lstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the contrasts; ``--json`` also writes them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", type=Path, help="the study's experiment folder")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = contrast_rows(args.experiment)
    if not rows:
        print(f"{args.experiment}: no contrast has both of its methods trained", file=sys.stderr)
        return 1
    print(markdown(rows), end="")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
