r"""OPCT training-step speed: this package against TRL's ``SDFTTrainer``, on the same work.

Usage (CPU, the defaults)::

    PYTHONPATH=. python benchmarks/opct_step.py
    PYTHONPATH=. python benchmarks/opct_step.py --device cuda --layers 12 --hidden 1024 --batch 16

The jobs are in the modules beside this one: ``step_setup.py`` (the model, the prompts, the GEMM peak and
the FLOPs of a step), ``step_workers.py`` (the subprocess that times one framework), ``step_report.py``
(medians and the table) and ``phases.py`` (where a step's time goes); this module is the driver.

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
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from step_report import package_versions, print_table, summarise  # the modules beside this script
from step_setup import build_model, gemm_peak, make_prompts, model_dims, step_flops
from step_workers import worker

HERE = Path(__file__).resolve().parent




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
    ap.add_argument("--model", default=None, help="a model folder or opct alias (e.g. smollm2) instead of the random "
                    "Llama; --hidden, --layers, --heads, --intermediate and --vocab are then the model's own")
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
        if args.model:
            from opct.models import resolve_model_path  # deferred: loads torch and transformers

            model_dir = Path(resolve_model_path(args.model))
        else:
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
        "versions": {"torch": torch.__version__, "python": platform.python_version(), **package_versions()},
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


if __name__ == "__main__":
    main()
