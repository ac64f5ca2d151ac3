"""The matched-sharpness study's pre-registered analysis (docs/matched_sharpness.md), written before any result
was read: D per level, the interaction I = D_L3 − D_L1, the secondary measures and the reading.

    python benchmarks/matched_sharpness_analysis.py STUDY_DIR [--t05-dir DIR] [--json OUT] [--md OUT]

The estimates are :mod:`opct_lab.report.matched_sharpness`'s; this script reads the folders, prints the Markdown
and writes what it is asked to.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from opct.errors import OpctError
from opct_lab.report.matched_sharpness import analyse
from opct_lab.report.matched_sharpness_md import analysis_markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study_dir", type=Path, help="the organism_matched_sharpness.yaml study's folder")
    parser.add_argument("--t05-dir", type=Path, default=None, help="the organism_matched_sharpness_t05.yaml study's folder")
    parser.add_argument("--json", type=Path, default=None, help="write the analysis as JSON here")
    parser.add_argument("--md", type=Path, default=None, help="write the analysis as Markdown here")
    args = parser.parse_args(argv)
    try:
        data = analyse(args.study_dir, args.t05_dir)
    except (OpctError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = analysis_markdown(data)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    if args.md:
        args.md.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
