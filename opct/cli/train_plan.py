"""``opct train --dry-run``: the memory plan of a run's step on each GPU and the step's composition, printed
before anything loads (the estimator: :mod:`opct.training.memory_plan`)."""

from __future__ import annotations

from opct.config import RunConfig
from opct.embedded import embedded_model, models_home
from opct.embedded.catalog import UnknownEmbeddedModelError
from opct.models import resolve_model_path
from opct.training.launch_checks import check_launch
from opct.training.memory_plan import (
    DEFAULT_PROMPT_TOKENS,
    GIB,
    PARTS,
    USABLE_SHARE,
    memory_plan,
    step_composition,
    step_settings,
)
from opct.training.model_shapes import LINEAR_NAMES, ModelShape, ShapeUnknown, read_shape

#: How each part of the plan is named when printed.
LABELS = {
    "weights": "weights", "master_copy": "fp32 master copy", "optimizer": "optimizer (AdamW, 2 moments)",
    "teacher": "frozen teacher", "merged_lora_copy": "merged LoRA copy (sampling)", "gradients": "gradients",
    "activations": "activations", "logits_chunks": "logits chunks", "kv_cache": "KV cache (rollouts)",
    "sampling_logits": "sampling logits", "gathered_for_sampling": "weights gathered for sampling (FSDP)",
    "static_cache": "static decoder's KV cache (rollouts)", "optimizer_step": "optimizer step temporaries",
}


def _gib(n: float) -> str:
    return f"{n / GIB:8.2f} GiB"


def planned_shape(name_or_path: str, revision: str | None) -> ModelShape:
    """The model's shape for the plan, with no network and no download: a folder, the Hugging Face cache or
    opct's table of public shapes first (:func:`read_shape`); an embedded model's converted folder, or its
    upstream's public shape before it is converted; then an alias's folder (the organism)."""
    try:
        model = embedded_model(name_or_path)
    except UnknownEmbeddedModelError:
        model = None
    if model is not None:
        folder = models_home() / model.name
        return read_shape(str(folder) if (folder / "config.json").is_file() else model.upstream, revision)
    try:
        return read_shape(name_or_path, revision)
    except ShapeUnknown:
        return read_shape(resolve_model_path(name_or_path), revision)


def plan_lines(cfg: RunConfig, gpus: int, fsdp: bool, gpu_memory_gib: float | None) -> list[str]:
    """The dry run's text: model and shape, the step's composition, the per-GPU parts, the peak and the verdict.
    The launch's own checks of the settings on ``gpus`` processes come first (:func:`check_launch`): what the
    launch would refuse, the dry run refuses."""
    check_launch(cfg, processes=gpus, sharded=fsdp)
    shape = planned_shape(cfg.model.name_or_path, cfg.model.revision)
    settings = step_settings(cfg, processes=gpus, fsdp=fsdp)
    plan = memory_plan(shape, settings)
    c = step_composition(settings)
    layout = f"{gpus} GPU{'s' if gpus > 1 else ''}" + (", FSDP2 full-shard" if fsdp else (", DDP" if gpus > 1 else ""))
    trained = "LoRA r=" + str(settings.lora_rank) if settings.finetune == "lora" else "full fine-tuning"
    prompt_note = "" if cfg.data.max_prompt_tokens else f" (assumed: data.max_prompt_tokens is unset; default {DEFAULT_PROMPT_TOKENS})"
    lines = [
        f"dry run of {cfg.name}: nothing is loaded; every figure is an estimate (formulas: opct/training/memory_plan.py)",
        f"model: {shape.source}: {shape.model_type}, {plan.parameters:,} parameters, {shape.num_hidden_layers} "
        f"layers, d={shape.hidden_size}, vocabulary {shape.vocab_size:,}"
        + ("" if shape.known_family else " (an unlisted family: counted as a Llama-like decoder)"),
        f"training: {cfg.method}, {trained} ({plan.trained_parameters:,} trained parameters), weights {cfg.model.dtype}, "
        f"mixed precision {cfg.train.mixed_precision}, gradient checkpointing "
        f"{'on' if settings.gradient_checkpointing else 'off'}, on {layout}",
        "",
        "the step:",
        f"  pairs: {c.pairs_per_step} per step, {c.pairs_per_process} per process",
        f"  rollouts: {c.rollouts_per_step} per step ({settings.samples_per_pair} per pair), {c.rollouts_per_process} "
        f"per process in {c.sampling_calls_per_process} sampling call(s) of up to {c.decode_steps_per_call} decode steps"
        if settings.on_policy else
        f"  targets: {c.rollouts_per_step} per step ({settings.samples_per_pair} per pair), generated once before the "
        "first step (no rollouts)",
        f"  tokens: {settings.prompt_tokens} prompt{prompt_note} + {settings.completion_tokens} completion per "
        f"sequence; up to {c.completion_tokens_per_step:,} completion tokens per step",
        f"  microbatches: {c.microbatches_per_process} per process of up to {settings.sequences_per_microbatch} sequences",
        f"  passes per process: {c.student_forwards} student forward, {c.backwards} backward, {c.recompute_forwards} "
        f"recomputed forward (checkpointing), {c.teacher_forwards} teacher forward (no gradient)",
        "",
        "memory per GPU:",
    ]
    if settings.finetune == "lora" and not plan.trained_parameters:
        lines[3:3] = [f"  note: 0 trained parameters planned: no name of lora.target_modules ({', '.join(settings.lora_targets)}) is "
                      f"a linear layer the plan counts ({', '.join(LINEAR_NAMES)}); the launch refuses a name that "
                      "matches no module of the model"]
    for name, phase in PARTS.items():
        if plan.parts[name] or name in ("weights", "activations"):
            lines.append(f"  {LABELS[name]:<40} {_gib(plan.parts[name])}   ({phase})")
    lines += [
        f"  activations with / without gradient checkpointing: {plan.activations_with_checkpointing / GIB:.2f} / "
        f"{plan.activations_without_checkpointing / GIB:.2f} GiB",
        f"  peak while sampling rollouts{'':<12} {_gib(plan.rollout_peak)}",
        f"  peak while training{'':<21} {_gib(plan.training_peak)}",
        f"  peak in the optimizer step{'':<14} {_gib(plan.step_peak)}",
        f"  peak{'':<36} {_gib(plan.peak)}",
    ]
    if gpu_memory_gib is not None:
        verdict = "fits" if plan.fits(gpu_memory_gib * GIB) else "does NOT fit"
        lines.append(f"{verdict} a {gpu_memory_gib:g} GiB GPU (at most {USABLE_SHARE:.0%} of it planned: the rest is "
                     "left to the CUDA context, fragmentation and workspaces)")
    return lines
