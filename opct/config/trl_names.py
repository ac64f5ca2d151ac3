"""What an unknown settings key most likely meant: opct's key for a TRL / transformers training-argument
name, or the known key it is a near spelling of.

opct does not accept TRL's names as aliases (one spelling per setting, so a file, a manifest and
``--print-config`` always agree); instead an unknown key that is one of them gets an error naming
opct's key. ``docs/from-trl.md`` is the same table for a reader.
"""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel

from opct.config.method_registry import METHODS

#: TRL's (``GRPOConfig``, ``GKDConfig``, ``SDFTConfig``, ``SFTConfig``, ``transformers.TrainingArguments``,
#: TRL's ``ModelConfig``) argument name -> what to write in opct instead. Kept in step with docs/from-trl.md.
TRL_NAMES: dict[str, str] = {
    # precision
    "bf16": "train.mixed_precision: bf16 (autocast over float32 weights), or model.dtype: bfloat16 (the weights "
            "themselves in bf16)",
    "fp16": "train.mixed_precision: fp16 (autocast with a loss scaler), or model.dtype: float16",
    "torch_dtype": "model.dtype",
    "dtype": "model.dtype",
    # batches and steps
    "per_device_train_batch_size": "train.sequences_per_microbatch (completions per forward/backward on one "
                                   "process) and train.pairs_per_step (pairs per optimizer step, all processes)",
    "gradient_accumulation_steps": "nothing: opct accumulates by itself, train.pairs_per_step pairs per optimizer "
                                   "step in microbatches of train.sequences_per_microbatch completions",
    "num_train_epochs": "train.epochs",
    "max_steps": "train.max_steps",
    # optimizer and schedule
    "learning_rate": "optim.lr",
    "lr_scheduler_type": "optim.schedule (constant, linear or cosine)",
    "warmup_ratio": "optim.warmup_steps (a number of steps, not a share of the run)",
    "warmup_steps": "optim.warmup_steps",
    "weight_decay": "optim.weight_decay",
    "adam_beta1": "optim.betas: [beta1, beta2]",
    "adam_beta2": "optim.betas: [beta1, beta2]",
    "adam_epsilon": "optim.eps",
    "max_grad_norm": "optim.max_grad_norm",
    "optim": "optim.* (opct trains with AdamW only: optim.lr, optim.betas, optim.eps, optim.weight_decay)",
    "gradient_checkpointing": "train.gradient_checkpointing",
    # logging, checkpoints, evaluation
    "report_to": "train.trackers (a list: tensorboard, wandb, trackio); metrics.jsonl is always written",
    "logging_steps": "nothing: every step is logged to metrics.jsonl (and to train.trackers)",
    "logging_strategy": "nothing: every step is logged to metrics.jsonl (and to train.trackers)",
    "save_steps": "train.checkpoint_every",
    "save_strategy": "train.checkpoint_every (steps between checkpoints; the last step is always saved)",
    "save_total_limit": "train.keep_checkpoints",
    "eval_steps": "validation.every (with data.validation: the validation pairs)",
    "eval_strategy": "validation.every (with data.validation: the validation pairs)",
    "resume_from_checkpoint": "nothing: rerunning the same command resumes from the last checkpoint",
    "run_name": "name (the run's folder name)",
    "push_to_hub": "opct export RUN_DIR --push-to-hub REPO, after training",
    "hub_model_id": "opct export RUN_DIR --push-to-hub REPO, after training",
    "log_completions": "train.log_rollouts",
    # generation (GRPO / GKD)
    "num_generations": "opct.sampling.n (OPCT's samples per prompt; BCT: bct.targets.n)",
    "max_completion_length": "opct.sampling.max_new_tokens (BCT: bct.targets.max_new_tokens)",
    "max_new_tokens": "opct.sampling.max_new_tokens (BCT: bct.targets.max_new_tokens)",
    "max_prompt_length": "data.max_prompt_tokens",
    "temperature": "opct.sampling.temperature (BCT: bct.targets.temperature)",
    "top_p": "opct.sampling.top_p",
    "use_vllm": "opct.sampling.engine: vllm (BCT: bct.targets.engine: vllm)",
    "vllm_gpu_memory_utilization": "opct.sampling.vllm_gpu_memory_utilization (with opct.sampling.engine: vllm)",
    # the loss
    "beta": "opct.loss.kl_coef (the weight of the KL to the teacher); GKD's JSD weight is opct.loss.jsd_beta "
            "(opct.loss.kind: full, divergence: jsd)",
    "lmbda": "nothing: method: opct is always on-policy (GKD's lmbda 1), method: bct trains on fixed targets "
             "(lmbda 0)",
    "loss_type": "opct.loss.kind (sampled, topk, full) and opct.loss.policy_loss (importance_sampling, ppo)",
    "epsilon": "opct.loss.clip_eps (with opct.loss.policy_loss: ppo)",
    "teacher_model_name_or_path": "nothing: the teacher is the frozen starting model, prompted with each pair's "
                                  "teacher_prompt",
    # self-distillation (TRL's SDFTConfig, trl.experimental.sdft)
    "distillation_mode": "opct.loss.kind (sampled: the sampled-token reverse KL, TRL's sampled_token; topk; full)",
    "distillation_alpha": "opct.loss.divergence (reverse_kl, forward_kl, jsd with opct.loss.jsd_beta) with "
                          "opct.loss.kind: full; the sampled loss is the reverse KL (TRL's alpha 1.0)",
    "teacher_model_kind": "nothing: the teacher is always the frozen starting model (TRL's base)",
    "teacher_prompt_template": "nothing: each pair carries its teacher_prompt (opct pairs build writes it; "
                               "data.columns maps a dataset's own field)",
    "generation_kwargs": "opct.sampling.* (n, temperature, top_p, max_new_tokens, min_new_tokens)",
    "use_cpu": "model.device: cpu",
    # model and adapter (TRL's ModelConfig)
    "model_name_or_path": "model.name_or_path",
    "model_revision": "model.revision",
    "use_peft": "finetune: lora",
    "lora_r": "lora.r",
    "lora_alpha": "lora.alpha",
    "lora_dropout": "lora.dropout",
    "lora_target_modules": "lora.target_modules",
    "use_rslora": "lora.use_rslora",
    "use_dora": "lora.use_dora",
    "lora_modules_to_save": "lora.modules_to_save",
}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The settings classes a field's type holds (through ``Annotated``, unions, ``list``/``dict``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def _method_class(name: str) -> type[BaseModel] | None:
    """A registered method's settings class, for a section named after it (``opct:``, ``bct:``)."""
    if name not in METHODS:
        return None
    return METHODS.get(name).config_class


def keys_at(model: type[BaseModel], parents: tuple[str, ...]) -> list[str]:
    """The keys the settings section at ``parents`` (a path of field names under ``model``) accepts; ``[]``
    where the path cannot be followed (a free mapping, a list)."""
    levels: list[type[BaseModel]] = [model]
    for part in parents:
        # a discriminated union's tag (opct.loss.topk.<key>) names the member the key was checked in
        tagged = [m for m in levels if "kind" in m.model_fields and part in typing.get_args(m.model_fields["kind"].annotation)]
        below: list[type[BaseModel]] = tagged
        for level in [] if tagged else levels:
            field = level.model_fields.get(part)
            if field is not None:
                below += _models_in(field.annotation)
            elif level is model and (method := _method_class(part)) is not None:
                below.append(method)
        levels = below
    return sorted({name for level in levels for name in level.model_fields})


def unknown_key_hint(model: type[BaseModel] | None, loc: tuple[str, ...]) -> str:
    """What to write instead of the unknown key at ``loc``: opct's key for a TRL name (or a near spelling of
    one), a known key it is a near spelling of, or ``""``."""
    name = loc[-1]
    if name in TRL_NAMES:
        return f"`{name}` is TRL's name: in opct it is {TRL_NAMES[name]} (docs/from-trl.md)"
    known = keys_at(model, loc[:-1]) if model is not None else []
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    if near:
        return f"did you mean {'.'.join((*loc[:-1], near[0]))}?"
    near = difflib.get_close_matches(name, TRL_NAMES, n=1, cutoff=0.8)
    if near:
        return f"`{near[0]}` is TRL's name: in opct it is {TRL_NAMES[near[0]]} (docs/from-trl.md)"
    return ""
