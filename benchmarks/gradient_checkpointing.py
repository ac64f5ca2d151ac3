r"""Gradient checkpointing on CPU: peak memory and step time of one OPCT step with it and without.

Usage::

    PYTHONPATH=. python benchmarks/gradient_checkpointing.py [--layers 16] [--hidden 256] [--length 1024]
        [--rows 2] [--repeats 2] [--steps 3] [--full] [--out FILE]

One invocation writes a random-initialised Qwen3-shaped model (``--layers`` decoder layers of width
``--hidden``, grouped-query attention, on the tiny test tokenizer's 512-token vocabulary, so that the
decoder's activations and not the logits are what a step holds) and then runs each variant, ``plain``
(``train.gradient_checkpointing: false``) and ``checkpointed`` (``true``), ``--repeats`` times,
alternating, each run in a fresh subprocess at ``--threads`` torch threads, so that the peak resident
memory is that variant's own and a change of load on shared cores falls on both alike.

Each run builds the policy as the training loop does (LoRA on all linear layers, or ``--full``; the
frozen teacher; checkpointing turned on after the teacher; opct's AdamW) and times ``--warmup`` +
``--steps`` OPCT steps on one fixed microbatch: ``--rows`` completions of ``--length`` tokens after one
short prompt (given, not sampled: decoding is the same with or without checkpointing), scored by the
teacher and the student (the sampled-token loss), backward, optimizer step. Reported per run: the
process's peak RSS (``ru_maxrss``), the RSS just before the first step, the peak's rise above it (the
step's own memory: activations, logits, gradients, optimizer state) and the median step time; per
variant the medians over runs; and the ratios checkpointed / plain of the step's own memory and of
the step time, both measured in this one invocation.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VARIANTS = ("plain", "checkpointed")


def write_model(root: Path, layers: int, hidden: int, length: int) -> Path:
    """A random Qwen3-shaped model on the tiny test tokenizer, saved under ``root``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config

    from opct.testing import make_tiny_model

    folder = make_tiny_model(root / "model")
    tok = AutoTokenizer.from_pretrained(folder)
    heads = max(2, hidden // 64)
    cfg = Qwen3Config(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), head_dim=hidden // heads,
        max_position_embeddings=length + 128, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        bos_token_id=None, tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
    return folder


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    """One variant's run in this process: the policy built as the loop builds it, then the timed steps."""
    import torch
    from accelerate import Accelerator

    from opct.config import RunConfig
    from opct.methods import METHODS
    from opct.methods.base import Microbatch, TrainContext
    from opct.models import add_lora, disable_dropout, load_model, load_tokenizer, make_teacher
    from opct.pairs import ConsistencyPair
    from opct.training.activation_checkpointing import enable_gradient_checkpointing
    from opct.training.master_weights import make_optimizer

    torch.set_num_threads(args.threads)
    checkpointing = args.worker == "checkpointed"
    cfg = RunConfig.model_validate({
        "name": "bench", "output_dir": str(args.model.parent), "method": "opct",
        "finetune": "full" if args.full else "lora", "model": {"name_or_path": str(args.model)},
        "lora": {"r": 16, "alpha": 32, "target_modules": "all-linear"}, "data": {"train": ["unused.jsonl"]},
        "optim": {"lr": 1e-5}, "train": {"gradient_checkpointing": checkpointing},
    })
    model = load_model(cfg.model)
    disable_dropout(model)
    if cfg.finetune == "lora":
        torch.manual_seed(0)  # the same adapter in every run
        model = add_lora(model, cfg.lora)
    teacher = make_teacher(model)
    layers = enable_gradient_checkpointing(model) if checkpointing else 0
    model.train()
    optimizer = make_optimizer([p for p in model.parameters() if p.requires_grad], cfg.optim)
    tokenizer = load_tokenizer(str(args.model))
    ctx = TrainContext(cfg=cfg, accelerator=Accelerator(cpu=True), model=model, policy=model, tokenizer=tokenizer,
                       teacher=teacher, run_dir=args.model.parent)
    method = METHODS.get("opct")(ctx)
    pair = ConsistencyPair("p", [{"role": "user", "content": "What is the capital of Zarnia? I think it is Velmora."}],
                           "What is the capital of Zarnia?")
    gen = torch.Generator().manual_seed(1)
    completions = torch.randint(8, len(tokenizer), (args.rows, args.length), generator=gen).tolist()
    mb = Microbatch([pair], completions, [0] * args.rows, [[-1.0] * args.length for _ in range(args.rows)],
                    [True] * args.rows)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss, _ = method.loss(mb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {
        "variant": args.worker, "checkpointed_layers": layers, "peak_rss_mib": peak / 1024,
        "rss_before_step_mib": rss_before / 1024, "step_rss_rise_mib": (peak - rss_before) / 1024,
        "step_s": statistics.median(times[args.warmup:]), "step_times_s": times, "loss": float(loss.detach()),
    }


def run_variant(args: argparse.Namespace, variant: str, model: Path) -> dict[str, Any]:
    """One variant in a fresh subprocess (this script with ``--worker``); its result."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", variant, "--model", str(model),
           "--length", str(args.length), "--rows", str(args.rows), "--warmup", str(args.warmup),
           "--steps", str(args.steps), "--threads", str(args.threads), *(["--full"] if args.full else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"the {variant} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per variant over its runs, and the ratios checkpointed / plain."""
    medians = {}
    for variant in VARIANTS:
        mine = [r for r in runs if r["variant"] == variant]
        medians[variant] = {key: statistics.median(r[key] for r in mine)
                            for key in ("peak_rss_mib", "rss_before_step_mib", "step_rss_rise_mib", "step_s")}
    plain, checkpointed = medians["plain"], medians["checkpointed"]
    return {
        "medians": medians,
        "ratios_checkpointed_over_plain": {
            "step_rss_rise": checkpointed["step_rss_rise_mib"] / plain["step_rss_rise_mib"],
            "peak_rss": checkpointed["peak_rss_mib"] / plain["peak_rss_mib"],
            "step_time": checkpointed["step_s"] / plain["step_s"],
        },
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--length", type=int, default=1024, help="completion tokens per row")
    parser.add_argument("--rows", type=int, default=2, help="completions in the microbatch")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each variant, alternating")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per run")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--full", action="store_true", help="full fine-tuning instead of LoRA")
    parser.add_argument("--out", type=Path, default=None, help="JSON file (default: benchmarks/results/...)")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = run_worker(args)
        print(json.dumps(result))
        return result
    with tempfile.TemporaryDirectory() as tmp:
        model = write_model(Path(tmp), args.layers, args.hidden, args.length)
        runs = [run_variant(args, variant, model) for _ in range(args.repeats) for variant in VARIANTS]
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "worker", "model")}
    report = {"benchmark": "gradient_checkpointing", "settings": settings, "runs": runs, **summarise(runs)}
    out = args.out or HERE / "results" / f"gradient-checkpointing-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    for variant, m in report["medians"].items():
        print(f"{variant:>12}: peak RSS {m['peak_rss_mib']:.0f} MiB (step's rise {m['step_rss_rise_mib']:.0f} MiB), "
              f"step {m['step_s']:.2f} s")
    r = report["ratios_checkpointed_over_plain"]
    print(f"checkpointed / plain: step memory {r['step_rss_rise']:.2f}, step time {r['step_time']:.2f}; written to {out}")
    return report


if __name__ == "__main__":
    main()
