r"""What the run-start off-policy profile costs against a run's first training steps, measured in one run.

Usage::

    python benchmarks/run_start_cost.py RUN_DIR [RUN_DIR ...] [--steps 100] [--out FILE]

For each finished training run directory (trained with ``profile.pairs_per_axis`` set), reads the profile's wall
time (``off_policy_profile.seconds`` in its manifest, timed around the measurement by
:mod:`opct.training.run_profile`) and the sum of ``step_time_s`` over its first ``--steps`` steps
(``metrics.jsonl``, each optimizer step's wall time: generation, forwards, backward, the update), and prints and
writes their ratio: the profile as a share of those steps. Both come from the same process, so a busy machine
slows both alike. Validation, checkpoints and the run's loading are in neither.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from opct.runs.layout import RunLayout


def run_cost(run_dir: Path, steps: int) -> dict[str, Any]:
    """The profile's seconds, the first ``steps`` steps' seconds, and the profile's share of them, for one run."""
    layout = RunLayout(run_dir)
    manifest = json.loads(layout.manifest.read_text(encoding="utf-8"))
    profile = manifest.get("off_policy_profile") or {}
    if "seconds" not in profile:
        raise SystemExit(f"{run_dir}: the run has no measured profile ({profile.get('skipped', 'none recorded')}); "
                         "train it with profile.pairs_per_axis set")
    rows = [json.loads(line) for line in layout.metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(rows) < steps:
        raise SystemExit(f"{run_dir}: {len(rows)} steps logged, fewer than --steps {steps}")
    step_seconds = sum(r["step_time_s"] for r in rows[:steps])
    cfg = manifest["config"]
    method_settings = cfg.get(cfg["method"], {})
    generation = method_settings.get("sampling") or method_settings.get("targets") or {}
    return {
        "run_dir": str(run_dir),
        "method": cfg["method"],
        "model": cfg["model"]["name_or_path"],
        "pairs_per_step": cfg["train"]["pairs_per_step"],
        "samples_per_pair": generation.get("n"),
        "max_new_tokens": generation.get("max_new_tokens"),
        "profile_pairs_per_axis": profile["pairs_per_axis"],
        "profile_axes": sorted(profile.get("axes", {})),
        "profile_seconds": profile["seconds"],
        "steps": steps,
        "steps_seconds": round(step_seconds, 3),
        "profile_share_of_steps": round(profile["seconds"] / step_seconds, 4),
    }


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--steps", type=int, default=100, help="the first N steps the profile is compared with")
    parser.add_argument("--out", type=Path, help="write the measurement here as JSON")
    parser.add_argument("--note", default="", help="how the runs were trained (code, machine load), kept in --out")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    runs = [run_cost(d, args.steps) for d in args.run_dirs]
    for r in runs:
        print(f"{r['run_dir']}: {r['method']}, profile {r['profile_seconds']:.2f} s, first {r['steps']} steps "
              f"{r['steps_seconds']:.1f} s: {100 * r['profile_share_of_steps']:.1f}%")
    if args.out:
        record = {"command": " ".join(["python", "benchmarks/run_start_cost.py", *argv]),
                  "commit": _commit(), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                  "cores": os.cpu_count(), "note": args.note, "runs": runs}
        args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
