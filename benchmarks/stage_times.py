r"""Where an ``opct run`` or ``opct-lab select`` took its time: each stage kind's count and seconds, from its log.

Usage::

    python benchmarks/stage_times.py LOG                 # a study family's log: train/eval/attack per method
    python benchmarks/stage_times.py LOG --by candidate  # a selection's log: one row per candidate
    python benchmarks/stage_times.py LOG --by family     # a whole study's log: one row per family and method
    python benchmarks/stage_times.py LOG --json

With ``--jobs N`` the runner prints ``<kind>:<name> done (<seconds> s ...)`` when a stage ends; a stage's
seconds are its own wall time, N stages at a time, so their sum is core time, not the wall time. The wall
time is the ``wall_seconds N`` line that the timing wrappers of ``benchmarks/results/mechanism/*.time.txt``
write at the end. A name's seed suffix (``-s0``) is dropped, so the rows pool seeds; ``--by method`` (the
default) also drops a selection candidate's number (``bct-03`` → ``bct``). In a whole study's log each
stage belongs to the ``family <name>:`` line before it, so every family's ``train:bct-s0`` is its own
stage (``--by family`` keeps them apart, the other groupings pool them). A stage that a rerun finished
again counts once, with the seconds of its attempts added (a stage killed mid-way logs no ``done``, so
the seconds it ran before the kill are not in the log). Rich wraps long log lines, so the text is read
with its line breaks as spaces.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

#: What the log says, in order: a study's ``family w4-long.llama: organism-llama-w4-long -> ...`` line, whose
#: stages follow it, and the runner's ``<kind>:<name> done (<seconds> s ...)``.
EVENT = re.compile(r"(?:^|\s)family\s+(?P<family>[\w.-]+):\s"
                   r"|(?P<kind>\w+):(?P<name>[\w.-]+)\s+done\s+\((?P<seconds>\d+)\s+s")
WALL = re.compile(r"wall_seconds\s+(\d+)")


def attempts(text: str) -> dict[str, list[int]]:
    """Each stage's ``done`` seconds, in log order, keyed ``[family/]kind:name`` (a study's stages under the
    family line before them); more than one where a rerun of the command ran the stage again (before opct
    kept finished stages without a process, a rerun reported them ``done`` in seconds)."""
    found: dict[str, list[int]] = defaultdict(list)
    family = ""
    for m in EVENT.finditer(text.replace("\n", " ")):
        if m["family"]:
            family = m["family"] + "/"
        else:
            found[f"{family}{m['kind']}:{m['name']}"].append(int(m["seconds"]))
    return dict(found)


def _grouped(found: dict[str, list[int]], by: str) -> dict[str, list[int]]:
    """:func:`stage_seconds` of stages already read by :func:`attempts`."""
    groups: dict[str, list[int]] = defaultdict(list)
    for stage, seconds in found.items():
        family, _, stage = stage.rpartition("/")
        kind, name = stage.split(":", 1)
        name = re.sub(r"-s\d+$", "", name)
        if by == "method":
            name = re.sub(r"-\d+$", "", name)
        groups[f"{family}/{kind}:{name}" if by == "family" and family else f"{kind}:{name}"].append(sum(seconds))
    return dict(groups)


def stage_seconds(text: str, by: str = "method") -> dict[str, list[int]]:
    """Each group's stage seconds, one number per stage in log order, the sum of its attempts. ``by``:
    ``method`` (seeds, candidates and a study's families pooled), ``candidate`` (seeds pooled) or
    ``family`` (seeds pooled, a study's families apart: ``w4-long.llama/train:opct``)."""
    return _grouped(attempts(text), by)


def wall_seconds(text: str) -> int | None:
    """The last ``wall_seconds N`` of a timed log, or None when the log has none (the run did not end)."""
    found = WALL.findall(text)
    return int(found[-1]) if found else None


def summary(text: str, by: str = "method") -> dict:
    """Rows (group, n, total, mean seconds), their sum (core seconds) and the wall time."""
    found = attempts(text)
    rows = [{"stage": k, "n": len(v), "total_s": sum(v), "mean_s": round(sum(v) / len(v), 1)}
            for k, v in sorted(_grouped(found, by).items())]
    repeated = sorted(stage for stage, seconds in found.items() if len(seconds) > 1)
    return {"rows": rows, "stage_seconds": sum(r["total_s"] for r in rows), "wall_seconds": wall_seconds(text),
            "repeated": repeated}


def render(result: dict) -> str:
    """The summary as the plain table of the ``*.time.txt`` files."""
    width = max([28, *(len(r["stage"]) + 1 for r in result["rows"])])
    lines = [f"{r['stage']:{width}s} n={r['n']:2d} total={r['total_s']:6d} s mean={r['mean_s']:5.0f} s" for r in result["rows"]]
    lines.append(f"sum of stage seconds {result['stage_seconds']}")
    if result["repeated"]:
        lines.append(f"stages done more than once (their attempts summed): {len(result['repeated'])}")
    if result["wall_seconds"] is not None:
        lines.append(f"wall seconds {result['wall_seconds']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the summary of one log."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log", type=Path, help="the log of an `opct run` or `opct-lab select` with --jobs")
    parser.add_argument("--by", choices=["method", "candidate", "family"], default="method")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        print(f"{args.log}: no such file", file=sys.stderr)
        return 2
    result = summary(args.log.read_text(), args.by)
    if not result["rows"]:
        print(f"{args.log}: no line '<kind>:<name> done (<seconds> s' (was it run with --jobs?)", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
