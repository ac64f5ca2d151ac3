"""benchmarks/opct_step.py's workers: one subprocess per framework and repeat, each timing its steps (opct's
``train()`` or TRL's ``SDFTTrainer``) and printing one ``RESULT`` JSON line."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path
from typing import Any

from step_setup import sync_device  # the module beside this script


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
            sync_device(spec["device"])
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            sync_device(spec["device"])
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
