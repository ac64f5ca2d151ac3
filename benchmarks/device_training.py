"""The device check's training sections (``benchmarks/device_sections.py`` runs them, one per process).

* ``lora`` and ``full``: opct's own training loop (``opct.training.loop.train``, engine ``hf``) on a random
  Qwen3-1.7B-shaped model in bf16, LoRA r=32 or full fine-tuning, 8 pairs x n=3 x 64 tokens per step (the
  settings of the 2026-11-28 H100 run, so the targets compare with it): median step time after the first
  step, the peak GPU memory, and step 1's |loss - KL| and |log ratio| (0 when sampler and learner agree);
* ``memory``: one LoRA step setting of the Qwen3-4B shape with gradient checkpointing and 1,024-token
  completions (2 pairs x n=2, one microbatch of 4), run for 2 steps (the second holds the optimizer state),
  its peak allocated GPU memory beside the dry run's estimate for the same configuration
  (:mod:`opct.training.memory_plan`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from typing import Any

from device_runs import build_model, peak_memory, read_metrics, run_config, step_summary, write_pairs

#: Prompt tokens the memory section's pairs stay under (their rendered length is about 60): the dry run's
#: estimate reads it as the prompt length (``data.max_prompt_tokens``), an upper bound.
MEMORY_PROMPT_TOKENS = 96


def section_finetune(args: argparse.Namespace, finetune: str) -> dict[str, Any]:
    """opct's training loop for a few steps on the 1.7B shape: step time, memory, step 1 on-policy."""
    import torch

    from opct.config import RunConfig
    from opct.training.loop import train

    size = "tiny" if args.smoke else "1.7b"
    model = build_model(args.work, size, args.dtype, args.tokenizer, args.device)
    pairs = write_pairs(args.work / "pairs.jsonl", 64, 24)
    cfg = RunConfig.model_validate(run_config(model, pairs, args.work / "runs", f"{finetune}-{size}", args,
                                              finetune=finetune, max_steps=args.steps, checkpoint_every=1000))
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    train(cfg, show_progress=False)
    wall = time.perf_counter() - start
    rows = read_metrics(cfg.run_dir)
    shutil.rmtree(cfg.run_dir, ignore_errors=True)  # its final checkpoint (weights and optimizer state): disk, not needed
    params = json.loads((model / "config.json").read_text())
    return {"status": "ok", "metrics": {"size": size, "finetune": finetune, "hidden_size": params["hidden_size"],
                                        "layers": params["num_hidden_layers"], "wall_s": wall, **step_summary(rows),
                                        **peak_memory()}}


def section_memory(args: argparse.Namespace) -> dict[str, Any]:
    """A 4B-shape LoRA run with gradient checkpointing and 1,024-token completions: its peak memory and
    the dry run's estimate for the same configuration, and their ratio."""
    import torch

    from opct.config import RunConfig
    from opct.training.loop import train
    from opct.training.memory_plan import GIB, memory_plan, step_settings
    from opct.training.model_shapes import read_shape

    size = "tiny" if args.smoke else "4b"
    new_tokens = 16 if args.smoke else 1024
    model = build_model(args.work, size, args.dtype, args.tokenizer, args.device)
    pairs = write_pairs(args.work / "pairs.jsonl", 64, 24)
    cfg = RunConfig.model_validate(run_config(
        model, pairs, args.work / "runs", f"memory-{size}", args, finetune="lora", new_tokens=new_tokens, n=2,
        pairs_per_step=2, sequences_per_microbatch=4, gradient_checkpointing=True, max_steps=2,
        checkpoint_every=1000, data={"max_prompt_tokens": MEMORY_PROMPT_TOKENS}))
    plan = memory_plan(read_shape(str(model)), step_settings(cfg))
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    train(cfg, show_progress=False)
    wall = time.perf_counter() - start
    measured = peak_memory()
    rows = read_metrics(cfg.run_dir)
    shutil.rmtree(cfg.run_dir, ignore_errors=True)
    peak = measured.get("peak_allocated_gib", measured.get("peak_rss_gib", 0.0))
    estimate = plan.peak / GIB
    return {"status": "ok", "metrics": {
        "size": size, "finetune": "lora", "gradient_checkpointing": True, "completion_tokens": new_tokens,
        "wall_s": wall, **step_summary(rows), **measured,
        "estimate_gib": estimate, "estimate_parts_gib": {k: v / GIB for k, v in plan.parts.items()},
        "estimate_rollout_peak_gib": plan.rollout_peak / GIB, "estimate_training_peak_gib": plan.training_peak / GIB,
        "estimate_step_peak_gib": plan.step_peak / GIB,
        "peak_over_estimate": peak / estimate if estimate else None,
        "compared": "peak_allocated_gib" if "peak_allocated_gib" in measured else "peak_rss_gib (no CUDA: not comparable)",
    }}
