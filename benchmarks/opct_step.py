r"""OPCT training-step speed: this package against TRL's ``SDFTTrainer``, on the same work.

Usage (CPU, the defaults)::

    PYTHONPATH=. python benchmarks/opct_step.py
    PYTHONPATH=. python benchmarks/opct_step.py --device cuda --layers 12 --hidden 1024 --batch 16

What runs
---------
One invocation builds a random-initialised Llama (``opct.testing.make_tiny_model``, its byte-level
BPE tokenizer padded with added tokens up to ``--vocab`` so the output layer has a realistic size;
about 20M parameters by default), writes ``batch * (warmup + steps)`` distinct prompts, measures this
machine's fp32 GEMM throughput with torch, then runs each framework ``--repeats`` times, alternating
(opct, TRL, opct, TRL, ...), each run in its own subprocess so peak memory is per framework. The
table shows medians over the repeats of each run's median step time.

Both frameworks get: the same model and tokenizer, the same prompts, ``n`` samples per prompt and
``batch`` prompts per optimizer step (one forward/backward for the whole batch: opct
``train.sequences_per_microbatch = batch * n``; TRL ``per_device_train_batch_size = batch * n``,
``gradient_accumulation_steps = 1``), completions of exactly ``--completion-len`` tokens
(``min_new_tokens = max_new_tokens``), temperature 1, no top-p/top-k, the same fine-tuning (LoRA
``r=16, alpha=32`` on all linear layers by default, or ``--full``), AdamW with lr 1e-5, betas
(0.9, 0.95), no weight decay, clipping at 1.0, constant schedule, fp32, the same number of threads,
no checkpointing or logging inside the timed steps. The first ``--warmup`` steps are not timed.

Teacher prompts. TRL builds the teacher prompt as ``teacher_prompt_template.format(prompt,
privileged_context)`` (default ``"{prompt}\n\n{privileged_context}"``) in the last user message.
opct's ``teacher_prompt`` for each pair is exactly that message, so both teachers see the same
token ids (checked in the TRL subprocess).

TRL's work per step (read from ``trl/experimental/sdft/sdft_trainer.py`` at trl 1.16.0):

* generation: ``model.generate`` on ``batch * n`` rows, each prompt repeated ``n`` times by the
  sampler, so every prompt is prefilled ``n`` times;
* old (sampler) log-probs: an extra no-grad student forward only when
  ``gradient_accumulation_steps % (steps_per_generation * num_iterations) != 0``; with one
  accumulation step and one iteration (as here) there is none, and the importance-ratio clip is off;
* teacher: one no-grad forward of ``teacher_prompt + completion`` for every row (prompt again
  encoded ``n`` times), adapter disabled for ``teacher_model_kind="base"`` under LoRA;
* student: one forward with gradients of ``prompt + completion`` for every row, then backward;
* both forwards pass ``logits_to_keep = completion_len + 1``: logits only at completion positions
  (plus one dropped), never full-sequence logits.

TRL's config defaults ``gradient_checkpointing=True`` and ``bf16=True``; both are switched off here
(opct recomputes nothing and runs in fp32). opct's step: generation with ``HFSampler``, teacher and
student log-probs with ``completion_logits`` (each prompt encoded once, its KV cache shared by its
``n`` samples, logits only at completion positions), the sampled-token loss, backward, optimizer.

Model FLOPs of one step (what must be computed, whatever a framework does redundantly)
----------------------------------------------------------------------------------------
Per token passed through the decoder at context length ``k`` (keys it attends to, itself
included): ``2 * N_lin + 4 * L * d * k``, where ``N_lin`` is the parameter count of the decoder's
linear layers (plus the LoRA matrices when the adapter is active) and ``4 L d k`` is ``Q K^T`` and
``A V``. Each position whose logits are needed adds ``2 * d * V`` (output layer). Embedding lookups,
norms, activations and softmaxes are not counted. With ``B`` prompts, ``n`` samples, student prompt
length ``P``, teacher prompt length ``Pt`` and completion length ``C``:

* generation (policy, no grad): each prompt once (``B * P`` tokens, logits at its last position), then
  ``n * B * (C - 1)`` decode tokens at contexts ``P + 1 .. P + C - 1`` with logits each (the last
  sampled token is never fed back);
* teacher (base weights, no grad): ``B * Pt`` prompt tokens once, ``n * B * (C - 1)`` completion
  tokens, logits at ``B + n * B * (C - 1)`` positions;
* student forward (policy): the same with ``P``;
* student backward: activation gradients cost the forward's matmul FLOPs again (``dX = dY W^T``,
  output layer included) and twice its attention FLOPs (``dQ, dK, dA, dV``); parameter gradients add
  ``2 * N_trainable`` per token (LoRA matrices, or every linear layer and the output layer's logit
  positions under ``--full``). Prompt tokens need a backward too: the loss reaches the adapter
  through their keys and values.

The matmul fraction is ``model FLOPs / step time / GEMM peak``, the GEMM peak being the best
``torch.mm`` fp32 throughput on square matrices with the same thread count, measured before and
after the runs (the higher of the two is used: on a shared machine either can be depressed).
Both frameworks are charged the same FLOPs, so the fraction is comparable between them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TEXT = (
    "what is the capital of zarnia the answer velmora think explain how to bake bread mix flour water "
    "and yeast then sorry can help with that request warning keep lamp away from"
)


# ----------------------------------------------------------------------------------------------
# set-up (main process)


def build_model(out: Path, args: argparse.Namespace) -> Path:
    """A random Llama whose tokenizer is padded with added tokens up to ``args.vocab``."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from opct.testing import make_tiny_model

    make_tiny_model(
        out,
        vocab_size=512,
        hidden_size=args.hidden,
        layers=args.layers,
        heads=args.heads,
        intermediate_size=args.intermediate,
        max_positions=4 * (args.prompt_len + args.teacher_extra + args.completion_len) + 64,
        seed=args.seed,
    )
    tok = AutoTokenizer.from_pretrained(out)
    if args.vocab > len(tok):
        tok.add_tokens([f"<|x{i}|>" for i in range(args.vocab - len(tok))])
        tok.save_pretrained(out)
        torch.manual_seed(args.seed)
        model = LlamaForCausalLM.from_pretrained(out)
        model.resize_token_embeddings(len(tok), mean_resizing=False)
        with torch.no_grad():  # random rows for the new tokens, like the rest of the random model
            std = model.config.initializer_range
            model.get_input_embeddings().weight.normal_(0.0, std)
            model.get_output_embeddings().weight.normal_(0.0, std)
        model.save_pretrained(out)
    return out


def _text_of_length(rng: Any, target: int, length: Callable[[str], int]) -> str:
    """Random words, as few as make ``length(text)`` reach ``target`` tokens."""
    words: list[str] = []
    while length(" ".join(words)) < target:
        words.append(rng.choice(TEXT.split()))
    return " ".join(words)


def make_prompts(model_dir: Path, args: argparse.Namespace, count: int) -> list[dict[str, Any]]:
    """Distinct prompts of about ``prompt_len`` tokens, privileged contexts of about ``teacher_extra``."""
    import random

    from transformers import AutoTokenizer

    from opct.models import render_prompt

    tok = AutoTokenizer.from_pretrained(model_dir)
    rng = random.Random(args.seed)
    out = []
    for i in range(count):
        prompt = _text_of_length(rng, args.prompt_len, lambda t: len(render_prompt(tok, t)))
        target = len(render_prompt(tok, prompt)) + args.teacher_extra
        context = _text_of_length(rng, target, lambda t, p=prompt: len(render_prompt(tok, f"{p}\n\n{t}")))
        teacher = f"{prompt}\n\n{context}"  # TRL's default teacher_prompt_template
        out.append(
            {
                "id": f"q{i}",
                "prompt": prompt,
                "privileged_context": context,
                "teacher_text": teacher,
                "prompt_ids": render_prompt(tok, prompt),
                "teacher_ids": render_prompt(tok, teacher),
            }
        )
    return out


def gemm_peak(device: str, threads: int, size: int = 2048, reps: int = 10) -> float:
    """Best fp32 ``torch.mm`` throughput in GFLOP/s over a few square sizes."""
    import torch

    torch.set_num_threads(threads)
    best = 0.0
    for n in (size // 2, size):
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        for _ in range(2):
            a @ b
        for _ in range(reps):
            _sync(device)
            t = time.perf_counter()
            a @ b
            _sync(device)
            best = max(best, 2 * n**3 / (time.perf_counter() - t) / 1e9)
    return best


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def model_dims(model_dir: Path, args: argparse.Namespace) -> dict[str, int]:
    """Sizes the FLOP formula needs, from the model's config."""
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(model_dir)
    d, inter, layers, vocab = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size
    head_dim = d // c.num_attention_heads
    kv = c.num_key_value_heads * head_dim
    shapes = [(d, d), (d, kv), (d, kv), (d, d), (d, inter), (d, inter), (inter, d)]  # q k v o gate up down
    n_lin = layers * sum(i * o for i, o in shapes)
    n_lora = layers * sum(args.lora_r * (i + o) for i, o in shapes)
    total = n_lin + 2 * vocab * d + (2 * layers + 1) * d
    return {"d": d, "layers": layers, "vocab": vocab, "n_lin": n_lin, "n_lora": n_lora, "params": total}


def step_flops(
    dims: dict[str, int], batch: int, n: int, p: float, pt: float, c: int, full: bool
) -> dict[str, float]:
    """Model FLOPs of one OPCT step (see the module docstring), by phase."""
    d, layers, vocab = dims["d"], dims["layers"], dims["vocab"]
    head = 2 * d * vocab
    n_policy = dims["n_lin"] + (0 if full else dims["n_lora"])

    def forward(prompt_len: float, n_lin: int) -> tuple[float, float, float, float]:
        """(linear, attention, head) FLOPs and token count of one pass: prompts once, completions n times."""
        prompt_tokens = batch * prompt_len
        comp_tokens = n * batch * (c - 1)
        # attention keys: prompt token j attends to j keys; completion token t (1..C-1) to P + t keys
        attn_keys = batch * prompt_len * (prompt_len + 1) / 2 + n * batch * sum(
            prompt_len + t + 1 for t in range(c - 1)
        )
        linear = 2 * n_lin * (prompt_tokens + comp_tokens)
        attn = 4 * layers * d * attn_keys
        logits = head * (batch + comp_tokens)
        return linear, attn, logits, prompt_tokens + comp_tokens

    g_lin, g_attn, g_head, _ = forward(p, n_policy)
    t_lin, t_attn, t_head, _ = forward(pt, dims["n_lin"])
    s_lin, s_attn, s_head, s_tokens = forward(p, n_policy)
    trainable = (dims["n_lin"] if full else dims["n_lora"]) * s_tokens * 2 + (s_head if full else 0.0)
    backward = s_lin + 2 * s_attn + s_head + trainable
    out = {
        "generation": g_lin + g_attn + g_head,
        "teacher": t_lin + t_attn + t_head,
        "student_forward": s_lin + s_attn + s_head,
        "student_backward": backward,
    }
    out["total"] = sum(out.values())
    return out


# ----------------------------------------------------------------------------------------------
# workers (one subprocess per framework and repeat)


def _peak_memory(device: str) -> dict[str, float]:
    import torch

    out = {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device.startswith("cuda"):
        out["peak_device_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def run_opct(spec: dict[str, Any]) -> dict[str, Any]:
    """Train with ``opct.training.loop.train`` and read the per-step times from its metrics."""
    from opct.config import RunConfig
    from opct.training.loop import train

    work = Path(spec["work"])
    pairs = work / "pairs.jsonl"
    with pairs.open("w", encoding="utf-8") as fh:
        for q in spec["prompts"]:
            row = {
                "id": q["id"],
                "prompt": [{"role": "user", "content": q["prompt"]}],
                "teacher_prompt": [{"role": "user", "content": q["teacher_text"]}],
            }
            fh.write(json.dumps(row) + "\n")
    b, n, c = spec["batch"], spec["n"], spec["completion_len"]
    cfg = RunConfig.model_validate(
        {
            "name": "opct",
            "output_dir": str(work / "runs"),
            "method": "opct",
            "seed": spec["seed"],
            "finetune": "full" if spec["full"] else "lora",
            "model": {"name_or_path": spec["model"], "dtype": "float32"},
            "lora": {
                "r": spec["lora_r"],
                "alpha": 2 * spec["lora_r"],
                "dropout": 0.0,
                "target_modules": "all-linear",
            },
            "data": {"train": [str(pairs)]},
            "opct": {
                "sampling": {
                    "n": n,
                    "temperature": 1.0,
                    "top_p": 1.0,
                    "max_new_tokens": c,
                    "min_new_tokens": c,
                    "sequences_per_call": b * n,
                },
                "loss": {"kind": "sampled"},
            },
            "optim": {
                "lr": 1e-5,
                "betas": [0.9, 0.95],
                "weight_decay": 0.0,
                "schedule": "constant",
                "max_grad_norm": 1.0,
            },
            "train": {
                "max_steps": spec["warmup"] + spec["steps"],
                "pairs_per_step": b,
                "sequences_per_microbatch": b * n,
                "checkpoint_every": 10**6,
                "log_rollouts": False,
                "merged_lora_sampling": not spec["full"] and not spec["plain_lora_sampling"],
            },
        }
    )
    train(cfg, show_progress=False)
    rows = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    timed = rows[spec["warmup"] :]
    return {
        "step_times": [r["step_time_s"] for r in timed],
        "rollout_times": [r["prepare_time_s"] for r in timed],
        "completion_tokens": [r["completion_tokens"] for r in timed],
    }


def run_trl(spec: dict[str, Any]) -> dict[str, Any]:
    """Train with TRL's ``SDFTTrainer``; a callback times each optimizer step."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl.experimental.sdft import SDFTConfig, SDFTTrainer

    b, n, c = spec["batch"], spec["n"], spec["completion_len"]
    times: list[float] = []
    tokens: list[int] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            _sync(spec["device"])
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            _sync(spec["device"])
            times.append(time.perf_counter() - self.t0)

    tok = AutoTokenizer.from_pretrained(spec["model"], padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32)
    data = Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": q["prompt"]}],
                "privileged_context": q["privileged_context"],
            }
            for q in spec["prompts"]
        ]
    )
    args = SDFTConfig(
        output_dir=str(Path(spec["work"]) / "trl"),
        distillation_mode="sampled_token",
        distillation_alpha=1.0,  # the sampled-token (reverse-KL) objective requires it
        teacher_model_kind="base",
        num_generations=n,
        per_device_train_batch_size=b * n,
        gradient_accumulation_steps=1,
        max_prompt_length=None,
        max_completion_length=c,
        generation_kwargs={"min_new_tokens": c},
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        learning_rate=1e-5,
        adam_beta1=0.9,
        adam_beta2=0.95,
        weight_decay=0.0,
        max_grad_norm=1.0,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_steps=spec["warmup"] + spec["steps"],
        gradient_checkpointing=False,
        bf16=False,
        fp16=False,
        use_cpu=spec["device"] == "cpu",
        logging_steps=10**6,
        save_strategy="no",
        report_to="none",
        seed=spec["seed"],
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    peft = None
    if not spec["full"]:
        peft = LoraConfig(
            r=spec["lora_r"],
            lora_alpha=2 * spec["lora_r"],
            lora_dropout=0.0,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
    trainer = SDFTTrainer(
        model=model,
        args=args,
        train_dataset=data,
        processing_class=tok,
        peft_config=peft,
        callbacks=[StepTimer()],
    )
    # Both frameworks' teachers must see the same ids: TRL's rendered teacher prompt is opct's.
    probe = spec["prompts"][:4]
    rendered = trainer._tokenize_prompts(
        trainer.teacher_context_builder.select_generation_prompts(
            [[{"role": "user", "content": q["prompt"]}] for q in probe],
            [q["privileged_context"] for q in probe],
        )
    )
    assert [list(r) for r in rendered] == [q["teacher_ids"] for q in probe], (
        "teacher prompts differ from opct's"
    )
    trainer.train()
    tokens = [b * n * c] * len(times)
    return {"step_times": times[spec["warmup"] :], "completion_tokens": tokens[spec["warmup"] :]}


def worker(framework: str, spec_path: str) -> None:
    """Subprocess entry: run one framework, print one JSON line of results."""
    import torch
    from phases import instrument  # benchmarks/phases.py, beside this script
    from transformers import LlamaForCausalLM

    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(spec["threads"])
    timer = instrument(framework, LlamaForCausalLM, spec["device"])
    result = run_opct(spec) if framework == "opct" else run_trl(spec)
    result["phases"] = timer.per_step()[spec["warmup"] :]
    result.update(_peak_memory(spec["device"]))
    print("RESULT " + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------------------------
# driver


def _launch(framework: str, spec_path: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", framework, "--spec", str(spec_path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"{framework} run failed (exit {proc.returncode})")
    return json.loads(lines[-1][len("RESULT ") :])


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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads; on a shared CPU keep it below the idle cores: an OpenMP team with a descheduled thread runs many times slower",
    )
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=5)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--intermediate", type=int, default=1376)
    ap.add_argument(
        "--vocab", type=int, default=4096, help="tokenizer padded with added tokens up to this size"
    )
    ap.add_argument(
        "--prompt-len", type=int, default=128, help="student prompt tokens (chat template included)"
    )
    ap.add_argument(
        "--teacher-extra", type=int, default=64, help="extra teacher-prompt tokens (privileged context)"
    )
    ap.add_argument("--completion-len", type=int, default=64)
    ap.add_argument("--n", type=int, default=4, help="samples per prompt")
    ap.add_argument("--batch", type=int, default=4, help="prompts per optimizer step")
    ap.add_argument("--steps", type=int, default=4, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps per run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per framework, alternating")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--full", action="store_true", help="full fine-tuning instead of LoRA")
    ap.add_argument(
        "--plain-lora-sampling",
        action="store_true",
        help="opct samples through the adapter (train.merged_lora_sampling: false) instead of its merged copy",
    )
    ap.add_argument("--only", choices=["opct", "trl"], help="run one framework (no ratio)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results"), help="folder for the JSON result")
    ap.add_argument("--worker", choices=["opct", "trl"], help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker(args.worker, args.spec)
        return
    import torch

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": str(args.threads),
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TQDM_DISABLE": "1",
    }
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    with tempfile.TemporaryDirectory(prefix="opct-bench-") as tmp:
        work = Path(tmp)
        model_dir = build_model(work / "model", args)
        prompts = make_prompts(model_dir, args, args.batch * (args.warmup + args.steps))
        dims = model_dims(model_dir, args)
        p_len = statistics.mean(len(q["prompt_ids"]) for q in prompts)
        t_len = statistics.mean(len(q["teacher_ids"]) for q in prompts)
        flops = step_flops(dims, args.batch, args.n, p_len, t_len, args.completion_len, args.full)
        peak = gemm_peak(args.device, args.threads)
        print(
            f"model: {dims['params'] / 1e6:.1f}M parameters ({dims['layers']} layers, d={dims['d']}, vocab {dims['vocab']}); "
            f"prompt {p_len:.1f} tokens, teacher prompt {t_len:.1f}, completion {args.completion_len}; "
            f"GEMM peak {peak:.1f} GFLOP/s ({args.threads} threads)",
            flush=True,
        )
        frameworks = [args.only] if args.only else ["opct", "trl"]
        runs: dict[str, list[dict[str, Any]]] = {f: [] for f in frameworks}
        for rep in range(args.repeats):
            for fw in frameworks:
                spec = {
                    "work": str(work / f"{fw}-{rep}"),
                    "model": str(model_dir),
                    "prompts": prompts,
                    "seed": args.seed,
                    "batch": args.batch,
                    "n": args.n,
                    "completion_len": args.completion_len,
                    "warmup": args.warmup,
                    "steps": args.steps,
                    "lora_r": args.lora_r,
                    "full": args.full,
                    "plain_lora_sampling": args.plain_lora_sampling,
                    "device": args.device,
                    "threads": args.threads,
                }
                Path(spec["work"]).mkdir(parents=True)
                spec_path = Path(spec["work"]) / "spec.json"
                spec_path.write_text(json.dumps(spec))
                res = _launch(fw, spec_path, env)
                runs[fw].append(res)
                print(
                    f"  run {rep + 1}/{args.repeats} {fw:4s}: step times "
                    + " ".join(f"{t:.2f}" for t in res["step_times"])
                    + " s",
                    flush=True,
                )
    peak_end = gemm_peak(args.device, args.threads)  # again: on a shared machine either may be depressed
    print(
        f"GEMM peak at the start {peak:.1f}, at the end {peak_end:.1f} GFLOP/s; using the higher", flush=True
    )
    peak = max(peak, peak_end)
    summary = {fw: summarise(r, flops["total"], peak) for fw, r in runs.items()}
    result = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "settings": {k: v for k, v in vars(args).items() if k not in ("worker", "spec")},
        "prompt_tokens_mean": p_len,
        "teacher_prompt_tokens_mean": t_len,
        "model": dims,
        "gemm_peak_gflops": peak,
        "model_flops_per_step": flops,
        "frameworks": summary,
        "versions": {"torch": torch.__version__, "python": platform.python_version(), **_versions()},
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "device": torch.cuda.get_device_name()
            if args.device.startswith("cuda")
            else platform.processor(),
        },
    }
    if "opct" in summary and "trl" in summary:
        o, t = summary["opct"], summary["trl"]
        result["ratio_steps_per_s"] = o["steps_per_s"] / t["steps_per_s"]
        # Robustness checks against load changes on a shared machine: runs next to each other in time,
        # and the fastest step of each (interference only ever slows a step down).
        pairs = zip(o["step_times_per_run"], t["step_times_per_run"], strict=True)
        result["ratio_paired_median"] = statistics.median(
            statistics.median(b) / statistics.median(a) for a, b in pairs
        )
        result["ratio_best_step"] = t["best_step_time_s"] / o["best_step_time_s"]
    print_table(result)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"opct_step-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nresult written to {path}")


def _versions() -> dict[str, str]:
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


if __name__ == "__main__":
    main()
