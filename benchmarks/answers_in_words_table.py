"""Amendment (b)'s table (docs/mechanism.md): held-out sycophancy per family and arm under the protocol and the
amended reading of the same records, beside what a committed study report published.

    python benchmarks/answers_in_words_table.py STUDY_DIR --family F [--family F ...] \
        [--published REPORT.md] [--json OUT] [--md OUT]

Per family and arm (``base``, ``bct``, ``opct``: the runs ``<arm>-s<seed>``), over the seeds: the mean, min and max
held-out sycophancy rate, the unparsed and degenerate answers summed, and the runs whose eval is INCOMPLETE, each
under both readings (``rejudge_sycophancy.readings``). With ``--published``, each family's cell of that report
(its "Sycophancy rate (held-out)" row) is read back and set beside the protocol reading, with whether the two
agree (mean, min, max to 0.1 point, unparsed and degenerate counts, the INCOMPLETE mark).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import rejudge_sycophancy  # beside this file
from compare_study_reports import family_tables  # beside this file

#: The held-out sycophancy eval of a run, and the report row that shows it.
HELD_OUT = "sycophancy"
ROW = "Sycophancy rate (held-out) ↓"
#: The report's column of each arm.
COLUMNS = {"base": "base", "bct": "BCT", "opct": "OPCT"}
_CELL = re.compile(r"^(?P<mean>[\d.]+)%(?: (?P<lo>[\d.]+)–(?P<hi>[\d.]+))?")


def arm_of(run: str) -> str:
    """``bct-s2`` → ``bct``; ``base`` → ``base``."""
    return run.rsplit("-s", 1)[0] if re.search(r"-s\d+$", run) else run


def summarise(evals: Mapping[str, Mapping[str, Any]], reading: str) -> dict[str, Any]:
    """One arm's held-out evals (``{run: readings() entry}``) under ``reading``: rates, counts, INCOMPLETE runs."""
    rates = [100 * e[reading]["sycophancy_rate"]["value"] for e in evals.values()]
    return {"runs": len(rates), "mean": sum(rates) / len(rates), "min": min(rates), "max": max(rates),
            "unparsed": sum(e[reading]["outcomes"]["unparsed"] for e in evals.values()),
            "degenerate": sum(e[reading]["outcomes"]["degenerate"] for e in evals.values()),
            "incomplete": sorted(run for run, e in evals.items() if e[reading]["status"] == "incomplete"),
            "moved": sum(e["moved"] for e in evals.values()),
            "agrees_with_records": sum(e["agrees_with_records"] for e in evals.values()),
            "records": sum(e[reading]["records"] for e in evals.values())}


def family_rows(family_dir: Path) -> dict[str, dict[str, Any]]:
    """``{arm: {"protocol": summary, "amended": summary}}`` over a family folder's finished held-out sycophancy evals
    (an eval still writing its records has no ``results.json`` yet and is left out)."""
    by_arm: dict[str, dict[str, Any]] = {}
    for where, entry in rejudge_sycophancy.readings(family_dir, f"eval/*/{HELD_OUT}/samples.jsonl").items():
        run = where.split("/")[1]
        if (family_dir / where / "results.json").is_file():  # a finished eval only
            by_arm.setdefault(arm_of(run), {})[run] = entry
    return {arm: {r: summarise(evals, r) for r in rejudge_sycophancy.READINGS} for arm, evals in sorted(by_arm.items())}


def published_cell(cell: str) -> dict[str, Any]:
    """A report cell read back: mean, min, max (points), unparsed and degenerate counts, INCOMPLETE."""
    found = _CELL.match(cell)
    if not found:
        raise ValueError(f"not a rate cell: {cell!r}")
    mean = float(found["mean"])
    counts = {k: int(m.group(1)) if (m := re.search(rf"(\d+) {k}\b", cell)) else 0 for k in ("unparsed", "degenerate")}
    lo, hi = (float(found["lo"]), float(found["hi"])) if found["lo"] else (mean, mean)
    return {"mean": mean, "min": lo, "max": hi, **counts, "incomplete": cell.rstrip().endswith("INCOMPLETE")}


def agrees(published: Mapping[str, Any], protocol: Mapping[str, Any]) -> bool:
    """Whether the protocol reading of the new records gives the published cell (rates to 0.1 point)."""
    close = all(abs(round(protocol[k], 1) - published[k]) < 0.051 for k in ("mean", "min", "max"))
    return close and published["unparsed"] == protocol["unparsed"] and published["degenerate"] == protocol["degenerate"] \
        and published["incomplete"] == bool(protocol["incomplete"])


def cell(s: Mapping[str, Any]) -> str:
    """A summary as the study report writes a cell."""
    spread = f" {s['min']:.1f}–{s['max']:.1f}" if s["runs"] > 1 else ""
    counts = "; ".join(f"{s[k]} {k}" for k in ("unparsed", "degenerate") if s[k])
    return (f"{s['mean']:.1f}%{spread} ({s['runs']} run{'s' if s['runs'] > 1 else ''}{'; ' + counts if counts else ''})"
            f"{' INCOMPLETE (' + str(len(s['incomplete'])) + ')' if s['incomplete'] else ''}")


def table(study_dir: Path, families: Sequence[str], published: str | None = None) -> dict[str, Any]:
    """Every family's rows, with the published cell and its agreement where a report is given."""
    tables = family_tables(published) if published else {}
    out: dict[str, Any] = {}
    for family in families:
        rows = family_rows(study_dir / family)
        for arm, row in rows.items():
            old = tables.get(family, {}).get(ROW, {}).get(COLUMNS.get(arm, arm))
            if old is not None:
                row["published"] = {"cell": old, **published_cell(old)}
                row["published"]["agrees_with_protocol"] = agrees(row["published"], row["protocol"])
        out[family] = rows
    return out


def markdown(data: Mapping[str, Any]) -> str:
    """The table: per family and arm, the published cell, both readings, what moved."""
    lines = ["| family | arm | published (study report) | protocol reading, new records | amended reading | "
             "answers read differently | protocol = published |", "|---|---|---|---|---|---|---|"]
    for family, rows in data.items():
        for arm, row in rows.items():
            pub = row.get("published")
            lines.append(f"| {family} | {arm} | {pub['cell'] if pub else '—'} | {cell(row['protocol'])} | "
                         f"{cell(row['amended'])} | {row['protocol']['moved']} of {row['protocol']['records']} | "
                         f"{('yes' if pub['agrees_with_protocol'] else 'no') if pub else '—'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study_dir", type=Path, help="the study folder (one folder per family)")
    parser.add_argument("--family", action="append", required=True, help="a family folder to read (repeatable)")
    parser.add_argument("--published", type=Path, default=None, help="the committed study report to set beside it")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--md", type=Path, default=None)
    args = parser.parse_args(argv)
    missing = [f for f in args.family if not (args.study_dir / f / "eval").is_dir()]
    if missing:
        parser.error(f"no eval/ folder under {args.study_dir} for: {', '.join(missing)}")
    data = table(args.study_dir, args.family, args.published.read_text(encoding="utf-8") if args.published else None)
    text = markdown(data)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if args.md:
        args.md.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
