"""The matched-sharpness study's pre-registered analysis (docs/matched_sharpness.md), written before any result
was read: D per level, the interaction I = D_L3 − D_L1, the secondary measures and the reading.

    python benchmarks/matched_sharpness_analysis.py STUDY_DIR [--t05-dir DIR] [--json OUT] [--md OUT]
    python benchmarks/matched_sharpness_analysis.py REFERENCE_DIR --t05-dir DIR --tau-1-from analysis.json [...]

The second form analyses τ = 0.5 alone and keeps τ = 1.0 as an earlier run of this script wrote it: REFERENCE_DIR
then needs only the τ = 1.0 file's ``bct`` runs on the τ = 0.5 families (docs/matched_sharpness.md, Deviation 4).

The estimates are :mod:`opct_lab.report.matched_sharpness`'s; this script reads the folders, prints the Markdown
and writes what it is asked to.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from opct.errors import OpctError
from opct_lab.report.matched_sharpness import RESAMPLES, analyse, analyse_t05, with_t05
from opct_lab.report.matched_sharpness_md import analysis_markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study_dir", type=Path, help="the organism_matched_sharpness.yaml study's folder")
    parser.add_argument("--t05-dir", type=Path, default=None, help="the organism_matched_sharpness_t05.yaml study's folder")
    parser.add_argument("--tau-1-from", type=Path, default=None,
                        help="keep τ = 1.0 from this earlier analysis JSON; STUDY_DIR then holds the bct reference "
                        "of the τ = 0.5 families (needs --t05-dir)")
    parser.add_argument("--json", type=Path, default=None, help="write the analysis as JSON here")
    parser.add_argument("--md", type=Path, default=None, help="write the analysis as Markdown here")
    args = parser.parse_args(argv)
    if args.tau_1_from is not None and args.t05_dir is None:
        parser.error("--tau-1-from needs --t05-dir (it analyses τ = 0.5 alone)")
    try:
        if args.tau_1_from is None:
            data = analyse(args.study_dir, args.t05_dir)
        else:
            earlier = json.loads(args.tau_1_from.read_text(encoding="utf-8"))
            if earlier.get("resamples") != RESAMPLES or "tau_1.0" not in earlier:
                raise OpctError(f"{args.tau_1_from}: not an analysis of this script (no 'tau_1.0' at {RESAMPLES} "
                                "resamples)")
            data = with_t05(earlier, analyse_t05(args.t05_dir, args.study_dir))
            data["tau_1.0_from"] = str(args.tau_1_from)
    except (OpctError, FileNotFoundError, ValueError) as exc:
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
