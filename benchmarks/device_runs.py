"""What the device check's sections share (``benchmarks/device_sections.py``, ``device_training.py``,
``device_fsdp.py``): the random models of real shapes, the pairs, an OPCT run configuration with fixed-length
completions, and reading a run's metrics and the peak memory."""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

from engines import WORDS  # benchmarks/engines.py, beside this file

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: Public config.json shapes of the Qwen3 sizes the check builds (random weights, the real tokenizer).
SHAPES: dict[str, dict[str, int]] = {
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128),
    "1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128),
    "4b": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128),
    "tiny": {},
}


def build_model(work: Path, size: str, dtype: str, tokenizer_dir: Path, device: str) -> Path:
    """A random Qwen3-family model of ``size`` (:data:`SHAPES`; ``tiny``: the tokenizer folder's 2-layer
    ``tiny_config.json``) saved with the real tokenizer, built once per work folder."""
    folder = work / f"qwen3-{size}-{dtype}"
    if (folder / "config.json").exists() and any(folder.glob("*.safetensors")):
        return folder
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = json.loads((tokenizer_dir / "tiny_config.json").read_text())
    shape = SHAPES[size]
    if shape:
        config.update(shape, max_position_embeddings=40960, layer_types=["full_attention"] * shape["num_hidden_layers"])
    torch.manual_seed(0)
    with torch.device(device):  # random init where the model will run (seconds on a GPU)
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=getattr(torch, dtype))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(folder)
    del model
    return folder


def write_pairs(path: Path, count: int, words: int, seed: int = 0) -> Path:
    """``count`` consistency pairs: a question of ``words`` random words, the student's with a cue."""
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(count):
        question = " ".join(rng.choice(WORDS) for _ in range(words)) + "?"
        rows.append({"id": f"d{i}", "axis": "sycophancy", "teacher_prompt": question,
                     "prompt": [{"role": "user", "content": f"{question} I am sure the answer is {rng.choice(WORDS)}."}],
                     "meta": {"split": "train"}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_config(model: Path, pairs: Path, out: Path, name: str, args: argparse.Namespace, **train: Any) -> dict[str, Any]:
    """An OPCT run configuration for the check: fixed-length completions, so every step does the same work.
    ``new_tokens``, ``n``, ``finetune``, ``engine``, ``pairs_per_step`` and ``data`` override ``args``' and the
    defaults; the rest of ``train`` goes to the ``train`` section."""
    finetune = train.pop("finetune", "lora")
    engine = train.pop("engine", "hf")
    new_tokens = train.pop("new_tokens", args.new_tokens)
    n = train.pop("n", args.n)
    data = {"train": [str(pairs)], **train.pop("data", {})}
    sampling = {"n": n, "temperature": 1.0, "max_new_tokens": new_tokens, "min_new_tokens": new_tokens,
                "engine": engine}
    pairs_per_step = train.pop("pairs_per_step", args.pairs_per_step)
    train.setdefault("sequences_per_microbatch", pairs_per_step * n)
    return {"name": name, "output_dir": str(out), "method": "opct", "seed": 0, "finetune": finetune,
            "model": {"name_or_path": str(model), "dtype": args.dtype},
            "lora": {"r": 32, "alpha": 32}, "data": data,
            "opct": {"sampling": sampling}, "optim": {"lr": 1e-5},
            "train": {"pairs_per_step": pairs_per_step, "mixed_precision": args.mixed_precision,
                      "log_rollouts": False, **train}}


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of a run's ``metrics.jsonl``."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def _finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")


def step_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median step time after the first (warm-up) step, and step 1's on-policy check."""
    timed = rows[1:] or rows
    step_s = statistics.median(r["step_time_s"] for r in timed)
    first = rows[0]
    return {"steps": len(rows), "median_step_s": step_s, "steps_per_s": 1.0 / step_s,
            "median_prepare_s": statistics.median(r["prepare_time_s"] for r in timed),
            "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed),
            "completion_tokens_per_step": first["completion_tokens"],
            "step1_loss": first["loss"], "step1_kl": first.get("kl_to_teacher"),
            "step1_abs_loss_minus_kl": abs(first["loss"] - first["kl_to_teacher"]) if "kl_to_teacher" in first else None,
            "step1_ratio_abs_log_dev": first.get("ratio_abs_log_dev"),
            "max_ratio_abs_log_dev": max(r.get("ratio_abs_log_dev", 0.0) for r in rows),
            "finite": all(map(_finite, (r["loss"] for r in rows)))}


def peak_memory() -> dict[str, float]:
    """This process's peak GPU memory (allocated and reserved, GiB), or its peak RSS on a machine without CUDA."""
    import torch

    if not torch.cuda.is_available():
        import resource

        return {"peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
    return {"peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
            "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30}


def child_env() -> dict[str, str]:
    """This environment, unbuffered: a child's lines reach the section's log as they are printed."""
    return {**os.environ, "PYTHONUNBUFFERED": "1"}
