"""How many CPU threads organism generation should use: the measurement behind ``--threads``' default.

Times what ``opct eval`` spends its time on, greedy generation by :class:`opct.sampling.hf_sampler.HFSampler`
with the shipped organism on the CPU, for ``--prompts`` organism eval prompts (evenly spaced over
every organism eval task, so short and long prompts mix) at ``--max-new-tokens`` tokens, once per
thread count of ``--threads``. The settings are interleaved (1, 2, 2, 1, 1, 2, ...) so a neighbour's
load falls on all of them alike, and each one's median over ``--repeats`` runs is reported, with the
load average before every run and whether every setting produced the same tokens.

    PYTHONPATH=. python benchmarks/threads.py [--threads 1,2] [--repeats 3] [--out benchmarks/results/threads.json]

On this 2-core machine (2026-11-23, 1788 tokens, the same tokens in every run): quiet (load average
0.6-0.7, 5 repeats) 2 threads took 1.27 s, 1 thread 1.84 s (``results/threads.json``); with a test
suite and an ``opct demo`` on the same cores (load average 4.4-4.7, 3 repeats) 2 threads took 11.7 s,
1 thread 2.6 s (``results/threads-busy.json``). ``--threads`` therefore keeps torch's default (one
thread per core) and says when to lower it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch


def organism_prompts(n: int) -> list[list[dict[str, str]]]:
    """``n`` prompts evenly spaced over every organism eval task's units (heldout split)."""
    from opct.evals.config import load_eval_config
    from opct.evals.suite import eval_tasks

    cfg = load_eval_config(None, [])
    units = [u for task in eval_tasks(cfg.evals, cfg, suffix_train=False) for u in task.units]
    step = max(1, len(units) // n)
    return [u.prompt for u in units[::step][:n]]


def time_generation(engine: Any, prompts: list[list[int]], params: Any, threads: int) -> dict[str, Any]:
    """One timed greedy generation of ``prompts`` with ``threads`` intra-op threads."""
    torch.set_num_threads(threads)
    load = os.getloadavg()[0]
    cpu0, t0 = time.process_time(), time.perf_counter()
    rollouts = engine.generate(prompts, params)
    wall = time.perf_counter() - t0
    tokens = sum(len(r.completion_ids) for r in rollouts)
    return {"threads": threads, "wall_s": round(wall, 3), "cpu_s": round(time.process_time() - cpu0, 3),
            "tokens": tokens, "loadavg_1min_before": round(load, 2),
            "completions": [r.completion_ids for r in rollouts]}


def main() -> None:
    from opct.config import ModelConfig
    from opct.models import load_spec_for_inference
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="Comma-separated thread counts to compare.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--batch", type=int, default=64, help="Sequences per generate() call (opct eval's default).")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/threads.json"))
    args = parser.parse_args()
    settings = [int(t) for t in args.threads.split(",")]
    torch_default = torch.get_num_threads()

    model, tokenizer, renderer = load_spec_for_inference(ModelConfig(name_or_path="organism", device="cpu"))
    prompts = [renderer(p) for p in organism_prompts(args.prompts)]
    engine = HFSampler(model, tokenizer, batch_size=args.batch)
    params = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens)
    for t in settings:  # warm-up: allocator, kernels, thread pools
        time_generation(engine, prompts[:16], params, t)

    runs: list[dict[str, Any]] = []
    for rep in range(args.repeats):
        order = settings if rep % 2 == 0 else settings[::-1]
        for t in order:
            runs.append({"repeat": rep, **time_generation(engine, prompts, params, t)})
            print(f"repeat {rep} threads {t}: {runs[-1]['wall_s']:.2f} s (load {runs[-1]['loadavg_1min_before']})", flush=True)

    same = all(r["completions"] == runs[0]["completions"] for r in runs)
    summary = {}
    for t in settings:
        walls = [r["wall_s"] for r in runs if r["threads"] == t]
        median = statistics.median(walls)
        summary[str(t)] = {"median_wall_s": round(median, 3), "walls_s": walls,
                           "tokens_per_s": round(runs[0]["tokens"] / median, 1)}
    fastest = min(settings, key=lambda t: summary[str(t)]["median_wall_s"])
    result = {
        "what": f"HFSampler greedy generation, organism, {len(prompts)} eval prompts, max_new_tokens {args.max_new_tokens}, "
                f"batch {args.batch}, CPU float32",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
        "torch": torch.__version__, "torch_default_threads": torch_default,
        "tokens": runs[0]["tokens"], "same_tokens_every_setting": same, "fastest_threads": fastest,
        "by_threads": summary,
        "runs": [{k: v for k, v in r.items() if k != "completions"} for r in runs],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
