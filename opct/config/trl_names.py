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

_NO_QUANTIZATION = ("not available: the teacher's log-probabilities are taken from the same weights the student "
                    "starts from, in model.dtype")
_SAMPLER_ONLY = ("not available: OPCT's importance ratio is taken against the distribution the tokens were sampled "
                 "from, which opct keeps to opct.sampling.temperature and opct.sampling.top_p")
_FRESH_EVERY_STEP = ("not needed: OPCT samples fresh completions for every optimizer step and trains on them once; "
                     "opct.sampling.sequences_per_call bounds one generate() call's memory")
_NO_REWARD = "not needed: there is no reward function; the per-token KL to the teacher is the advantage"
_PAIRS_NOT_TEXT = ("not needed: training data are consistency pairs (prompt, teacher_prompt), the loss is taken on "
                   "completion tokens only and never packed; data.max_prompt_tokens bounds a prompt, and data.columns maps a "
                   "dataset's own field names")
_NO_VLLM_SERVER = "not needed: there is no vLLM server; the engine (opct.sampling.engine: vllm) runs in each process"
_FROZEN_TEACHER = "not available: the teacher is always the frozen starting model (TRL's teacher_model_kind: base)"

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
    "gradient_accumulation_steps": "not needed: opct accumulates by itself, train.pairs_per_step pairs per optimizer "
                                   "step in microbatches of train.sequences_per_microbatch completions",
    "num_train_epochs": "train.epochs",
    "max_steps": "train.max_steps",
    # optimizer and schedule
    "learning_rate": "optim.lr",
    "lr_scheduler_type": "optim.schedule (constant, linear or cosine)",
    "warmup_ratio": "optim.warmup_steps, a whole number of steps, not a share of the run: the share times the "
                    "run's steps (0.1 of 200 steps is 20); transformers 5 dropped warmup_ratio for warmup_steps "
                    "below 1, which opct does not read as a share",
    "warmup_steps": "optim.warmup_steps (a whole number of steps: transformers 5 reads a value below 1 as a share "
                    "of the run, opct refuses it)",
    "weight_decay": "optim.weight_decay",
    "adam_beta1": "optim.betas: [beta1, beta2]",
    "adam_beta2": "optim.betas: [beta1, beta2]",
    "adam_epsilon": "optim.eps",
    "max_grad_norm": "optim.max_grad_norm",
    "optim": "optim.* (opct trains with AdamW only: optim.lr, optim.betas, optim.eps, optim.weight_decay)",
    "gradient_checkpointing": "train.gradient_checkpointing",
    # logging, checkpoints, evaluation
    "report_to": "train.trackers (a list: tensorboard, wandb, trackio); metrics.jsonl is always written",
    "logging_steps": "not needed: every step is logged to metrics.jsonl (and to train.trackers)",
    "logging_strategy": "not needed: every step is logged to metrics.jsonl (and to train.trackers)",
    "save_steps": "train.checkpoint_every",
    "save_strategy": "train.checkpoint_every (steps between checkpoints; the last step is always saved)",
    "save_total_limit": "train.keep_checkpoints",
    "eval_steps": "validation.every (with data.validation: the validation pairs)",
    "eval_strategy": "validation.every (with data.validation: the validation pairs)",
    "resume_from_checkpoint": "not needed: rerunning the same command resumes from the last checkpoint",
    "run_name": "name (the run's folder name)",
    "push_to_hub": "opct export RUN_DIR --push-to-hub REPO, after training",
    "hub_model_id": "opct export RUN_DIR --push-to-hub REPO, after training",
    "log_completions": "train.log_rollouts",
    # generation (GRPO / GKD)
    "num_generations": "opct.sampling.n (OPCT's samples per prompt; BCT: bct.targets.n)",
    "max_completion_length": "opct.sampling.max_new_tokens (BCT: bct.targets.max_new_tokens)",
    "max_new_tokens": "opct.sampling.max_new_tokens (BCT: bct.targets.max_new_tokens)",
    "max_prompt_length": "data.max_prompt_tokens (a longer prompt is refused, or dropped with data.too_long: drop; "
                         "never cut, where TRL cuts it from the left)",
    "temperature": "opct.sampling.temperature (BCT: bct.targets.temperature)",
    "top_p": "opct.sampling.top_p",
    "use_vllm": "opct.sampling.engine: vllm (BCT: bct.targets.engine: vllm)",
    "vllm_gpu_memory_utilization": "opct.sampling.vllm_gpu_memory_utilization (with opct.sampling.engine: vllm)",
    # the loss
    "beta": "opct.loss.kl_coef, which does something else: GRPO's beta (default 0.0) weighs a KL penalty to a "
            "reference beside the reward; opct.loss.kl_coef (default 1.0) weighs the KL to the teacher, the whole "
            "objective (there is no reward), so it scales the learning signal, and 0 or below is refused. GKD's beta "
            "(the JSD mixture weight) is opct.loss.jsd_beta (opct.loss.kind: full, divergence: jsd)",
    "lmbda": "not needed: method: opct is always on-policy (GKD's lmbda 1), method: bct trains on fixed targets "
             "(lmbda 0)",
    "loss_type": "no counterpart, it means another thing: TRL's loss_type is how token losses are averaged "
                 "(GRPO: grpo, dapo, dr_grpo, bnpo...) or the SFT loss (nll, dft); opct averages over the step's "
                 "completion tokens, as dapo does. opct.loss.kind (sampled, topk, full) picks the divergence to the "
                 "teacher and opct.loss.policy_loss (importance_sampling, ppo) how the sampled one trains",
    "epsilon": "opct.loss.clip_eps (with opct.loss.policy_loss: ppo)",
    "teacher_model_name_or_path": "not needed: the teacher is the frozen starting model, prompted with each pair's "
                                  "teacher_prompt",
    # self-distillation (TRL's SDFTConfig, trl.experimental.sdft)
    "distillation_mode": "opct.loss.kind (sampled: the sampled-token reverse KL, TRL's sampled_token; topk; full)",
    "distillation_alpha": "opct.loss.divergence (reverse_kl, forward_kl, jsd with opct.loss.jsd_beta) with "
                          "opct.loss.kind: full; the sampled loss is the reverse KL (TRL's alpha 1.0)",
    "teacher_model_kind": "not needed: the teacher is always the frozen starting model (TRL's base)",
    "teacher_prompt_template": "not available: a pair carries its teacher_prompt; TRL's rows of prompt and "
                               "privileged_context are read with TRL's default template (the last user turn, a "
                               "blank line, the context); for another template write teacher_prompt in each row",
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
    "use_dora": "lora.use_dora (not with train.merged_lora_sampling or the vLLM engine, which merge plain LoRA only)",
    "lora_modules_to_save": "lora.modules_to_save",
    "init_lora_weights": "lora.init_lora_weights (true or gaussian; the initialisations that rewrite the base "
                         "weights, the frozen teacher, are refused)",
    "trust_remote_code": "model.trust_remote_code",
    "attn_implementation": "model.attn_implementation",
    "load_in_4bit": _NO_QUANTIZATION,
    "load_in_8bit": _NO_QUANTIZATION,
    "deepspeed": "not available: DeepSpeed is refused, with the reason; multi-GPU training is accelerate launch "
                 "with FSDP2 or DDP (docs/training.md)",
    "fsdp": "accelerate launch --config_file configs/accelerate/fsdp2.yaml: FSDP2, which shards the frozen teacher "
            "with the policy (docs/training.md)",
    # generation settings opct has none of
    "top_k": _SAMPLER_ONLY,
    "min_p": _SAMPLER_ONLY,
    "repetition_penalty": _SAMPLER_ONLY,
    "vllm_mode": "not needed: the vLLM engine (opct.sampling.engine: vllm) is colocated, one per process (TRL's "
                 "colocate); there is no server mode",
    "generation_batch_size": _FRESH_EVERY_STEP,
    "steps_per_generation": _FRESH_EVERY_STEP,
    "num_iterations": _FRESH_EVERY_STEP,
    # the loss, GRPO / GKD
    "seq_kd": "not needed: BCT's targets are the teacher's own answers (method: bct, bct.targets)",
    "reward_funcs": _NO_REWARD,
    "reward_weights": _NO_REWARD,
    "scale_rewards": _NO_REWARD,
    "teacher_model_init_kwargs": "not needed: the teacher is the frozen starting model, loaded once with model.*",
    "disable_dropout": "train.disable_dropout (on by default; lora.dropout is kept)",
    # data (SFT)
    "dataset_text_field": _PAIRS_NOT_TEXT,
    "max_length": _PAIRS_NOT_TEXT,
    "packing": _PAIRS_NOT_TEXT,
    "completion_only_loss": _PAIRS_NOT_TEXT,
    "assistant_only_loss": _PAIRS_NOT_TEXT,
    "dataset_num_proc": "not needed: pairs are read once, at the start",
    "dataloader_num_workers": "not needed: pairs are read once, at the start",
    "remove_unused_columns": "not needed: pairs are read once, at the start; fields other than the pair's are "
                             "ignored (data.columns maps the ones it needs)",
    # the rest of TRL's SDFTConfig
    "model_init_kwargs": "model.* (model.dtype, model.attn_implementation, model.revision, model.trust_remote_code)",
    "num_generations_eval": "validation.samples.n (the student's samples per validation prompt)",
    "ds3_gather_for_generation": "not needed: DeepSpeed is refused; under FSDP2 the sampler gathers the weights "
                                 "itself (docs/training.md)",
    "shuffle_dataset": "data.shuffle",
    "chat_template_kwargs": "model.chat_template_kwargs",
    "cache_implementation": "opct.sampling.decoder (static: a static KV cache, CUDA graphs on a GPU; plain: a "
                            "cache that grows)",
    "use_teacher_server": "not available: the teacher is the frozen starting model, scored in the training process",
    "vllm_model_impl": "opct.sampling.vllm_engine_args: {model_impl: transformers} (passed to vllm.LLM)",
    "vllm_enable_sleep_mode": "not needed: the vLLM engine sleeps between generations by default "
                              "(opct.sampling.vllm_engine_args: {enable_sleep_mode: false} turns it off)",
    "vllm_server_base_url": _NO_VLLM_SERVER,
    "vllm_server_host": _NO_VLLM_SERVER,
    "vllm_server_port": _NO_VLLM_SERVER,
    "vllm_group_port": _NO_VLLM_SERVER,
    "vllm_server_timeout": _NO_VLLM_SERVER,
    "vllm_tensor_parallel_size": "not available: one colocated vLLM engine per process, on that process's GPU",
    "vllm_max_model_length": "opct.sampling.vllm_engine_args: {max_model_len: N} (passed to vllm.LLM)",
    "teacher_update_rate": _FROZEN_TEACHER,
    "teacher_sync_steps": _FROZEN_TEACHER,
    "distillation_topk": "opct.loss.topk with opct.loss.kind: topk (the reverse KL over the student's top-k "
                         "tokens; opct.loss.form: renormalised is TRL's default form, partial opct's)",
    "distillation_is_clip": "opct.tis_cap (min(pi_trainer / pi_sampler, cap), with opct.rollout_logprobs: "
                            "recompute and opct.loss.kind: sampled; off by default, TRL's default is 2.0)",
    "distillation_add_tail": "opct.loss.form: tail with opct.loss.kind: topk (the top k plus one bucket of the "
                             "remaining mass on each side)",
    "generate_from_teacher": "not available: OPCT samples the student on prompt (on-policy); method: bct trains on "
                             "the teacher's own answers to teacher_prompt",
    "num_loss_tokens_to_skip": "not available: the loss covers every completion token",
}


#: opct keys a TRL name of another meaning meets (``loc`` without a loss kind's tag) -> what to say beside a
#: problem with the key's value: the value is wrong because the reader took TRL's meaning.
TRL_MEANINGS: dict[tuple[str, ...], str] = {
    ("optim", "warmup_steps"): "optim.warmup_steps is a whole number of steps: transformers 5 reads a warmup_steps "
                               "below 1 as a share of the run (its replacement for warmup_ratio), opct does not; "
                               "write the share times the run's steps (docs/from-trl.md)",
    ("opct", "loss", "kl_coef"): "opct.loss.kl_coef is not GRPO's beta: it weighs the KL to the teacher, the whole "
                                 "objective (default 1.0), where GRPO's beta weighs a penalty beside a reward "
                                 "(default 0.0) (docs/from-trl.md)",
    ("optim",): "optim is opct's optimizer section (optim.lr, optim.betas, optim.eps, optim.weight_decay); TRL's "
                "optim, the optimizer's name, is not needed: opct trains with AdamW only (docs/from-trl.md)",
}


def meaning_note(loc: tuple[str, ...]) -> str:
    """What :data:`TRL_MEANINGS` says about the key at ``loc`` (a validation error's location), or ``""``."""
    for key, note in TRL_MEANINGS.items():
        if len(loc) >= len(key) and loc[0] == key[0] and loc[-1] == key[-1] and set(key) <= set(loc):
            return note
    return ""


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
