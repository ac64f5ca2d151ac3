"""benchmarks/opct_step.py's summary: medians over repeats, the versions measured, and the printed table."""

from __future__ import annotations

import statistics
from typing import Any


def summarise(runs: list[dict[str, Any]], flops: float, peak_gflops: float) -> dict[str, Any]:
    """Medians over repeats of each run's median step time."""
    step = statistics.median(statistics.median(r["step_times"]) for r in runs)
    tokens = statistics.median(t for r in runs for t in r["completion_tokens"])
    out = {
        "step_time_s": step,
        "steps_per_s": 1.0 / step,
        "completion_tokens_per_step": tokens,
        "completion_tokens_per_s": tokens / step,
        "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
        "model_gflops_per_s": flops / step / 1e9,
        "matmul_fraction": flops / step / 1e9 / peak_gflops,
        "best_step_time_s": min(t for r in runs for t in r["step_times"]),
        "step_times_per_run": [r["step_times"] for r in runs],
    }
    if all(r.get("phases") for r in runs):
        # each phase: the median over runs of its median over a run's steps; "other" is the step time's rest
        from phases import PHASES

        phases = {p: statistics.median(statistics.median(s[p] for s in r["phases"]) for r in runs) for p in PHASES}
        phases["other"] = max(0.0, step - sum(phases.values()))
        out["phases_s"] = phases
    if "rollout_times" in runs[0]:
        out["rollout_time_s"] = statistics.median(statistics.median(r["rollout_times"]) for r in runs)
    if "peak_device_mib" in runs[0]:
        out["peak_device_mib"] = max(r["peak_device_mib"] for r in runs)
    return out



def package_versions() -> dict[str, str]:
    """The installed versions of the libraries both frameworks run on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("transformers", "peft", "accelerate", "trl"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def print_table(result: dict[str, Any]) -> None:
    s = result["settings"]
    f = result["model_flops_per_step"]
    tuning = "full fine-tuning" if s["full"] else f"LoRA r={s['lora_r']}"
    print(
        f"\nOPCT step, {s['device']}, {s['threads']} threads, {tuning}, "
        f"batch {s['batch']} prompts x n={s['n']}, prompt {result['prompt_tokens_mean']:.0f} / teacher "
        f"{result['teacher_prompt_tokens_mean']:.0f} / completion {s['completion_len']} tokens, "
        f"{result['model']['params'] / 1e6:.1f}M params; median of {s['repeats']} runs x {s['steps']} steps"
    )
    print(
        f"GEMM peak (fp32 torch.mm): {result['gemm_peak_gflops']:.1f} GFLOP/s; model FLOPs per step: "
        f"{f['total'] / 1e9:.1f} GFLOP (generation {f['generation'] / 1e9:.1f}, teacher {f['teacher'] / 1e9:.1f}, "
        f"student fwd {f['student_forward'] / 1e9:.1f}, bwd {f['student_backward'] / 1e9:.1f})"
    )
    header = f"{'framework':10s} {'step s':>8s} {'steps/s':>8s} {'tokens/s':>9s} {'peak RSS MiB':>13s} {'GFLOP/s':>8s} {'matmul frac':>11s}"
    print(header)
    print("-" * len(header))
    for fw, r in result["frameworks"].items():
        name = {"opct": "opct", "trl": "TRL SDFT"}[fw]
        mem = f"{r['peak_rss_mib']:.0f}" + (
            f" (dev {r['peak_device_mib']:.0f})" if "peak_device_mib" in r else ""
        )
        print(
            f"{name:10s} {r['step_time_s']:8.3f} {r['steps_per_s']:8.3f} {r['completion_tokens_per_s']:9.1f} {mem:>13s} "
            f"{r['model_gflops_per_s']:8.1f} {r['matmul_fraction']:11.1%}"
        )
    _print_phases(result["frameworks"])
    if "ratio_steps_per_s" in result:
        print(
            f"ratio opct / TRL (steps/s): {result['ratio_steps_per_s']:.2f}x "
            f"(median of adjacent-run ratios {result['ratio_paired_median']:.2f}x, fastest steps {result['ratio_best_step']:.2f}x)"
        )


def _print_phases(frameworks: dict[str, Any]) -> None:
    """Seconds per step in each phase (benchmarks/phases.py), one column per framework."""
    timed = {fw: r["phases_s"] for fw, r in frameworks.items() if "phases_s" in r}
    if not timed:
        return
    names = {"opct": "opct", "trl": "TRL SDFT"}
    print("\nper phase, s/step " + "".join(f"{names[fw]:>10s}" for fw in timed) + ("   TRL/opct" if len(timed) == 2 else ""))
    for phase in next(iter(timed.values())):
        row = [timed[fw][phase] for fw in timed]
        ratio = f"{row[1] / row[0]:10.2f}x" if len(row) == 2 and row[0] > 0 else ""
        print(f"  {phase:16s}" + "".join(f"{v:10.3f}" for v in row) + ratio)

