r"""Three organism trainings at once against the same three one after another, as a ratio.

Usage::

    PYTHONPATH=. python benchmarks/contention.py                       # every variant below
    PYTHONPATH=. python benchmarks/contention.py --variants default,passive --steps 5

What runs
---------
``--runs`` (3) OPCT trainings of the organism (``opct train`` processes, the quick demo's sampling:
n=3, 48 tokens; ``--pairs`` pairs per step, ``--steps`` steps, LoRA r=16, different seeds; the first
64 sycophancy training pairs, written once to a file so that no run spends time building them), first one
after another, then all at once, for each variant of the threads' settings:

* ``default``: torch's own thread count (one per core) and OpenMP's own waiting (spin, then sleep);
* ``passive``: the same thread count with ``OMP_WAIT_POLICY=PASSIVE`` (a thread waiting at a barrier
  sleeps at once instead of spinning on a core a neighbour needs);
* ``one-thread``: ``--threads 1`` for each run (what ``opct-lab select --jobs N`` does);
* ``shared``: each run gets ``cores / runs`` threads, at least 1, with ``OMP_WAIT_POLICY=PASSIVE``.

Reported per variant: the wall time of the sequential and of the concurrent batch and their ratio
(concurrent / sequential: 1.0 means sharing costs nothing, 3.0 that nothing overlapped usefully), and
the median training step (``step_time_s`` in ``metrics.jsonl``) in each mode and their ratio (the
slowdown of one step under contention). Every process's start-up (imports, model load) is in the wall
times and not in the steps.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
VARIANTS = ("default", "passive", "one-thread", "shared")


def cores() -> int:
    """CPUs this process may run on (affinity)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def variant_env(variant: str, runs: int) -> tuple[dict[str, str], list[str]]:
    """The environment and extra ``opct train`` arguments of ``variant``."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPCT_THREADS", "OMP_WAIT_POLICY")}
    env["OPCT_PASSIVE_WAIT"] = "0"  # OpenMP's own waiting unless the variant sets it (not opct's choice when busy)
    args: list[str] = []
    if variant == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    elif variant == "one-thread":
        args = ["--threads", "1"]
    elif variant == "shared":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        args = ["--threads", str(max(1, cores() // runs))]
    elif variant != "default":
        raise SystemExit(f"unknown variant {variant!r}: {', '.join(VARIANTS)}")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env, args


def write_pairs(path: Path, count: int) -> Path:
    """The first ``count`` organism sycophancy training pairs, as a file (each run reads it in no time)."""
    from opct.wiring import organism_source

    records = list(organism_source("sycophancy:train"))[:count]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def write_config(folder: Path, seed: int, args: argparse.Namespace) -> Path:
    """One organism OPCT run configuration."""
    import yaml

    cfg = {"name": f"run-{seed}", "output_dir": str(folder), "method": "opct", "seed": seed, "finetune": "lora",
           "model": {"name_or_path": "organism"}, "lora": {"r": 16, "alpha": 32, "target_modules": "all-linear"},
           "data": {"train": [str(args.pairs_file)]},
           "opct": {"sampling": {"n": 3, "temperature": 1.0, "max_new_tokens": 48, "sequences_per_call": 96}},
           "optim": {"lr": 3e-4},
           "train": {"max_steps": args.steps, "pairs_per_step": args.pairs, "sequences_per_microbatch": args.pairs * 3,
                     "checkpoint_every": 1000, "log_rollouts": False}}
    path = folder / f"run-{seed}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run_batch(configs: list[Path], env: dict[str, str], extra: list[str], concurrent: bool) -> float:
    """Train every configuration, all at once or one after another; returns the wall time."""
    cmd = [sys.executable, "-m", "opct.cli", "train", "--no-progress"]
    start = time.perf_counter()
    if concurrent:
        procs = [subprocess.Popen([*cmd, "-c", str(c), *extra], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for c in configs]
        for p in procs:
            _, err = p.communicate()
            if p.returncode:
                raise RuntimeError(err[-2000:])
    else:
        for c in configs:
            res = subprocess.run([*cmd, "-c", str(c), *extra], env=env, cwd=REPO, capture_output=True, text=True)
            if res.returncode:
                raise RuntimeError(res.stderr[-2000:])
    return time.perf_counter() - start


def step_times(folder: Path) -> list[float]:
    """Every run's step times after its first step."""
    out = []
    for metrics in sorted(folder.glob("run-*/metrics.jsonl")):
        rows = [json.loads(line) for line in metrics.read_text().splitlines()]
        out += [r["step_time_s"] for r in rows[1:]]
    return out


def measure(variant: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Sequential then concurrent batches of ``variant``."""
    env, extra = variant_env(variant, args.runs)
    result: dict[str, Any] = {"variant": variant, "extra_args": extra,
                              "omp_wait_policy": env.get("OMP_WAIT_POLICY")}
    for mode in ("sequential", "concurrent"):
        folder = tmp / f"{variant}-{mode}"
        folder.mkdir()
        configs = [write_config(folder, seed, args) for seed in range(args.runs)]
        result[f"{mode}_wall_s"] = run_batch(configs, env, extra, mode == "concurrent")
        result[f"{mode}_median_step_s"] = statistics.median(step_times(folder))
    result["wall_ratio"] = result["concurrent_wall_s"] / result["sequential_wall_s"]
    result["step_ratio"] = result["concurrent_median_step_s"] / result["sequential_median_step_s"]
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure each variant; print a table and write the JSON result."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"contention-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    settings = {k: v for k, v in vars(args).items() if k != "pairs_file"}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        args.pairs_file = write_pairs(Path(tmp) / "pairs.jsonl", 64)
        for variant in [v for v in args.variants.split(",") if v]:
            rows.append(measure(variant, args, Path(tmp)))
            result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "cores": cores(), "settings": settings,
                      "load_average_before": load_before, "load_average_after": os.getloadavg()[0], "variants": rows}
            path.write_text(json.dumps(result, indent=1))  # after each variant: a long run keeps what it measured
            print(json.dumps(rows[-1]), flush=True)
    print(f"{args.runs} organism OPCT trainings x {args.steps} steps ({args.pairs} pairs x n=3 x 48 tokens), "
          f"{cores()} cores; load average before {load_before:.1f}, after {os.getloadavg()[0]:.1f}")
    print(f"{'variant':12s} {'seq wall':>9s} {'conc wall':>10s} {'ratio':>6s} {'seq step':>9s} {'conc step':>10s} {'ratio':>6s}")
    for r in rows:
        print(f"{r['variant']:12s} {r['sequential_wall_s']:9.1f} {r['concurrent_wall_s']:10.1f} {r['wall_ratio']:6.2f} "
              f"{r['sequential_median_step_s']:9.2f} {r['concurrent_median_step_s']:10.2f} {r['step_ratio']:6.2f}")
    print(f"result written to {path}")
    return result


if __name__ == "__main__":
    main()
