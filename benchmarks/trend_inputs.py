"""The dose-response trend test's inputs as a file, and the test read again from it (docs/mechanism.md,
amendment (a)): per level its dose and each metric's pooled OPCT − BCT with its bootstrap resamples
(:mod:`opct_lab.report.trend_inputs`).

    python benchmarks/trend_inputs.py export STUDY_DIR OUT.json[.gz] [--index LEVEL=N ...]
    python benchmarks/trend_inputs.py read INPUTS.json[.gz] [--replace LEVEL OTHER.json[.gz]] [--json OUT]

``export`` reads a study folder (its ``study.json`` levels, families and profiles); ``--index`` gives a level its
index in the whole study when the folder holds only part of it (the index seeds the level's bootstrap).
``read`` prints every metric's β, its 95% and 98.33% intervals and readings, and the hypothesis's reading;
``--replace`` first swaps LEVEL's entry for OTHER.json's (the same index and resamples).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from opct_lab.report.study import load_study_dir
from opct_lab.report.trend_inputs import level_inputs, replace_level, trends_from_inputs


def _index(text: str) -> tuple[str, int]:
    level, _, n = text.partition("=")
    if not level or not n.isdigit():
        raise argparse.ArgumentTypeError(f"expected LEVEL=N, got {text!r}")
    return level, int(n)


def load(path: Path) -> dict:
    """An inputs file, gzip-compressed when its name ends in ``.gz``."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return json.loads(raw.decode("utf-8"))


def save(path: Path, data: dict) -> None:
    """Write an inputs file (gzip-compressed, reproducibly, when its name ends in ``.gz``)."""
    raw = (json.dumps(data) + "\n").encode("utf-8")
    path.write_bytes(gzip.compress(raw, mtime=0) if path.suffix == ".gz" else raw)


def _n(x: float | None) -> str:
    return "—" if x is None else f"{x:+.4g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="write a study folder's trend inputs")
    export.add_argument("study_dir", type=Path)
    export.add_argument("out", type=Path)
    export.add_argument("--index", type=_index, action="append", default=[], help="LEVEL=N: its index in the study")
    read = sub.add_parser("read", help="the trend test from an inputs file")
    read.add_argument("inputs", type=Path)
    read.add_argument("--replace", nargs=2, metavar=("LEVEL", "OTHER"), default=None)
    read.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            study, families = load_study_dir(args.study_dir)
            levels = study.get("levels") or {}
            indices = dict(args.index) or None
            if indices is not None and set(indices) != set(levels):
                raise ValueError(f"--index must name every level of the folder: {', '.join(levels)}")
            data = level_inputs(args.study_dir, levels, families, indices=indices)
            save(args.out, data)
            print(f"{args.out}: {len(data['levels'])} level(s), {data['resamples']} resamples")
            return 0
        inputs = load(args.inputs)
        if args.replace:
            level, other = args.replace
            inputs = replace_level(inputs, load(Path(other)), level)
        result = trends_from_inputs(inputs)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for key, t in result["trends"].items():
        print(f"{key}: β {_n(t['beta'])} 95% [{_n(t['ci'][0])}, {_n(t['ci'][1])}] ({t['reading']}); 98.33% "
              f"[{_n(t['ci_bonferroni'][0])}, {_n(t['ci_bonferroni'][1])}] ({t['reading_bonferroni']})")
    print(f"hypothesis: {result['hypothesis']['outcome']}: {'; '.join(result['hypothesis']['reasons'])}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
