r"""``opct run --jobs 2`` against ``--jobs 1`` on a reduced quick demo, as a ratio of wall times.

Usage::

    PYTHONPATH=. python benchmarks/experiment_jobs.py               # the default reduced demo, jobs 1 then 2
    PYTHONPATH=. python benchmarks/experiment_jobs.py --steps 40 --limit 32 --jobs 2,3

What runs
---------
The quick demo's experiment (``opct/experiments/organism_demo.yaml``: base, BCT and OPCT on the organism)
reduced by ``--set`` overrides to ``--steps`` training steps for BCT and OPCT (their recipes' own steps), ``--limit`` eval units per task and
an adaptive attack of ``--budget`` queries per behaviour, once per value of ``--jobs``, each into its own
temporary folder (nothing is reused between them). ``--jobs 1`` runs every stage in one process with
torch's default threads (one per core); ``--jobs N`` runs N stages at a time, each its own process with one
thread. Reported: each run's wall time, and ``jobs 1 / jobs N`` (above 1.0: the parallel run is faster).
The machine's 1-minute load average before each run is printed beside it: on shared cores the ratio
moves with the neighbours' load, so compare ratios measured in one invocation only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "opct" / "experiments" / "organism_demo.yaml"


def reduced_overrides(steps: int, limit: int, budget: int) -> list[str]:
    """The ``--set`` overrides that shrink the quick demo (every method keeps its recipe but its steps)."""
    return [*(f"method_settings.{m}.train.max_steps={steps}" for m in ("bct", "opct")), f"eval.limit={limit}",
            f"attack.budget={budget}", "train.validation.every=null"]


def command(out: Path, jobs: int, overrides: list[str]) -> list[str]:
    """The ``opct run`` command line for one measurement."""
    cmd = [sys.executable, "-m", "opct.cli", "run", str(DEMO), "--no-progress", "--jobs", str(jobs),
           "--set", f"output_dir={out}"]
    for item in overrides:
        cmd += ["--set", item]
    return cmd


def measure(jobs: int, overrides: list[str]) -> dict[str, float]:
    """Run the reduced demo once with ``jobs`` in a fresh folder: its wall seconds and the load before it."""
    with tempfile.TemporaryDirectory(prefix="opct-jobs-") as tmp:
        load = os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.run(command(Path(tmp), jobs, overrides), cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"jobs {jobs}: opct run exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return {"jobs": jobs, "wall_s": round(wall, 1), "load_before": round(load, 2)}


def main(argv: list[str] | None = None) -> int:
    """Measure each ``--jobs`` value and print the rows and the ratios as JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--limit", type=int, default=16)
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--jobs", default="2", help="comma-separated --jobs values compared with 1")
    args = parser.parse_args(argv)
    overrides = reduced_overrides(args.steps, args.limit, args.budget)
    base = measure(1, overrides)
    print(json.dumps(base), flush=True)
    for jobs in (int(j) for j in args.jobs.split(",")):
        row = measure(jobs, overrides)
        row["speedup_vs_jobs_1"] = round(base["wall_s"] / row["wall_s"], 2)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
