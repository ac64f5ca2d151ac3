r"""The dry run's memory plan: per-GPU memory of one training step, and the step's composition, from the
model's shape (:mod:`opct.training.model_shapes`) and the run's settings, before anything loads.

Pure functions; every number is an estimate from the formulas below (``b_w``: bytes per weight of
``model.dtype``; ``b_a``: bytes per activation, 2 under ``train.mixed_precision`` bf16/fp16 or a half
``model.dtype``, else 4; ``N``: processes; ``/N``: divided by ``N`` under FSDP, whole under DDP or one
process; ``P``: the model's parameters; ``T``: the trained ones, ``P`` or the LoRA adapter's):

* **weights** ``P b_w /N``, plus the LoRA adapter ``T x 4`` (PEFT keeps it in float32);
* **gradients** ``T x b_t /N`` (``b_t``: 4 for a LoRA adapter, else ``b_w``);
* **optimizer** AdamW's two moments, ``2 T x 4 /N`` when an fp32 master copy is stepped, else ``2 T b_t /N``;
* **master copy** ``T x 4 /N`` when ``optim.master_weights`` keeps one (``fp32``, or ``auto`` with half
  trained weights; none when the trained weights are already float32);
* **teacher** nothing under LoRA (the policy with its adapter off) or for a method without rollouts (BCT's
  targets are generated once, before the first step), ``P b_w /N`` under full fine-tuning;
* **activations**, one microbatch of ``S`` sequences of ``t = prompt + completion`` tokens. Per token and
  layer, with ``q = H hd`` and ``kv = KV hd``, a layer keeps
  ``A = k (4 + 2 b_a) d + 2 b_a (q + kv) + n (4 + b_a)(q + kv) + 4 b_a I + 7 b_a r``: each of its ``k`` RMSNorms
  its float32 input, that input cast back and its output; the rotated queries and keys, the values and the
  attention output; with per-head query and key norms (``n`` = 1: Qwen3, Gemma 3) their float32 inputs and
  casts; the MLP's gate, up, activation and product; LoRA's rank-``r`` intermediates. These are the tensors
  autograd saves in a bf16 Qwen3 decoder layer with SDPA attention (counted with
  ``torch.autograd.graph.saved_tensors_hooks``: within 2% of ``A``, the rest being the softmax statistics
  and the rotary tables; with a LoRA adapter under bf16 autocast within 5%). A LoRA run with half-precision
  weights and *no* autocast also keeps float32 copies of the adapted layers' inputs (PEFT casts them to the
  float32 adapter's dtype), about a third more, which ``A`` does not count: train such runs with
  ``train.mixed_precision`` set, as the recipes do. Outside the layers the final norm keeps ``(4 + 2 b_a) d``: ``S t (L A + (4 + 2 b_a) d)``;
  with gradient checkpointing each layer keeps only its input, ``S t (L d b_a + A + (4 + 2 b_a) d)`` (one
  layer recomputed at a time);
* **logits chunks** ``C V (b_a + 8)`` for ``C`` positions of the vocabulary (the chunk, its float32 copy and
  its softmax in the backward), times the chunks the loss holds at once, which the loss kind declares
  (``logits_copies``: 1 for ``sampled``, 2 for ``topk`` and ``full``, the teacher's chunk too; 1 for a
  method without a ``loss`` section, as BCT's), where ``C`` follows
  opct's rule (:mod:`opct.methods.logit_path`): a microbatch's ``S t`` positions whole while their float32
  logits fit in ``train.whole_logits_max_mib``, else ``train.logprob_chunk_positions`` positions, fewer where
  that many would not fit the limit; under FSDP the logits are built whole (``C = S t``);
* **rollouts** (sampling, before the backward): the KV cache ``R (prompt + completion) L 2 KV hd b_a`` for
  the ``R`` sequences of one sampling call (every layer at full length: an upper bound for sliding-window
  layers), the last position's logits ``R V x 8``, under FSDP the policy gathered whole for sampling
  (``P b_w (1 - 1/N)`` more), and a merged copy of the adapted weights where LoRA sampling is merged
  (``train.merged_lora_sampling: true``, or ``auto`` on a GPU without FSDP, vLLM, DoRA or ``modules_to_save``:
  :func:`opct.sampling.merged_lora.merged_sampling_copy`).

* **static cache** with the static decoder (``sampling.decoder`` ``auto`` or ``static`` on the hf engine: the
  plan is a GPU's): the call's batch decodes into a static KV cache of ``R c L 2 KV hd b_a`` (``c``: prompt
  plus completion rounded up to :data:`~opct.sampling.static_decoder.CAPACITY_BUCKET`), freed when the call
  ends (:meth:`opct.sampling.hf_sampler.HFSampler.release_static`); the rollouts' own KV cache is then the
  encoded prompts' (``R prompt L 2 KV hd b_a``), copied into it;
* **optimizer step** (after the backward, gradients held, activations freed): the temporaries of torch's
  foreach AdamW, which holds ``sqrt(v)`` for every trained tensor at once (``T b_o``, ``b_o`` the moments'
  bytes), and with an fp32 master copy the float32 copies of the gradients it steps with (``T x 4``): ``T x
  8 /N`` with a master copy, else ``T b_t /N`` (:class:`opct.training.master_weights.MasterWeightAdamW`).

The step's peak is the largest of its three phases: rollouts (weights, optimizer state, master copy,
teacher, and the rollout terms), training (the same, plus gradients, activations and logits
chunks) and the optimizer step (the same, plus gradients and the step's temporaries). It fits a GPU
when the peak is at most :data:`USABLE_SHARE` of its memory: the rest is left to the CUDA context, the
allocator's fragmentation and the libraries' workspaces (an allowance, not a measurement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from opct.config import RunConfig
from opct.config.lora import merges_for_sampling
from opct.sampling.logit_rows import positions_fitting
from opct.sampling.static_decoder import static_capacity
from opct.training.model_shapes import ModelShape, lora_parameter_count, parameter_count

#: The share of a GPU's memory a step may plan to use (the rest: CUDA context, fragmentation, workspaces).
USABLE_SHARE = 0.9
#: Prompt tokens assumed when ``data.max_prompt_tokens`` is unset (the pairs are not read by a dry run).
DEFAULT_PROMPT_TOKENS = 256
GIB = 2**30
_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "auto": 2}


@dataclass(frozen=True)
class StepSettings:
    """What one training step does, as the memory plan needs it (:func:`step_settings` reads a config)."""

    finetune: Literal["lora", "full"]
    weight_bytes: int
    activation_bytes: int
    lora_rank: int
    lora_targets: list[str] | str
    master_weights: Literal["auto", "fp32", "off"]
    gradient_checkpointing: bool
    pairs_per_step: int
    samples_per_pair: int
    prompt_tokens: int
    completion_tokens: int
    sequences_per_microbatch: int
    sequences_per_call: int
    logprob_chunk_positions: int
    whole_logits_max_mib: float
    logits_copies: int
    on_policy: bool
    merged_lora_sampling: bool
    processes: int = 1
    fsdp: bool = False
    static_decoder: bool = False


def step_settings(cfg: RunConfig, processes: int = 1, fsdp: bool = False, prompt_tokens: int | None = None) -> StepSettings:
    """The :class:`StepSettings` of ``cfg`` on ``processes`` GPUs (sharded with FSDP when ``fsdp``).

    A method that samples rollouts each step has ``sampling`` in its section (OPCT); one that does not
    (BCT) trains on targets of ``targets.max_new_tokens`` tokens, generated once before the first step.
    """
    method = cfg.method_config
    sampling = getattr(method, "sampling", None)
    generation = sampling or getattr(method, "targets", None)
    loss = getattr(method, "loss", None)
    weight_bytes = _DTYPE_BYTES[cfg.model.dtype]
    half = cfg.train.mixed_precision != "no" or weight_bytes == 2
    return StepSettings(
        finetune=cfg.finetune, weight_bytes=weight_bytes, activation_bytes=2 if half else 4,
        lora_rank=cfg.lora.r, lora_targets=cfg.lora.target_modules, master_weights=cfg.optim.master_weights,
        gradient_checkpointing=cfg.train.gradient_checkpointing, pairs_per_step=cfg.train.pairs_per_step,
        samples_per_pair=generation.n if generation is not None else 1,
        prompt_tokens=prompt_tokens or cfg.data.max_prompt_tokens or DEFAULT_PROMPT_TOKENS,
        completion_tokens=generation.max_new_tokens if generation is not None else 0,
        sequences_per_microbatch=cfg.train.sequences_per_microbatch,
        sequences_per_call=sampling.sequences_per_call if sampling is not None else 1,
        logprob_chunk_positions=cfg.train.logprob_chunk_positions, whole_logits_max_mib=cfg.train.whole_logits_max_mib,
        logits_copies=loss.logits_copies if loss is not None else 1, on_policy=sampling is not None,
        merged_lora_sampling=_merges_for_sampling(cfg, fsdp, sampling), processes=processes, fsdp=fsdp,
        static_decoder=sampling is not None and getattr(sampling, "engine", "hf") == "hf"
        and getattr(sampling, "decoder", "auto") != "plain",
    )


def _merges_for_sampling(cfg: RunConfig, fsdp: bool, sampling: object) -> bool:
    """Whether rollouts on a GPU sample from a merged copy of the LoRA policy (the run's own rule)."""
    return merges_for_sampling(cfg.train.merged_lora_sampling, plain_lora=not (cfg.lora.use_dora or cfg.lora.modules_to_save),
                               sharded=fsdp, vllm=getattr(sampling, "engine", "hf") != "hf", cuda=True)


def logits_chunk(s: StepSettings, vocab: int) -> int:
    """Positions whose logits one scoring call holds at a time (``C`` above)."""
    whole = s.sequences_per_microbatch * s.completion_tokens
    fits = max(1, positions_fitting(s.whole_logits_max_mib, vocab))
    if s.fsdp or whole <= fits:
        return whole
    return min(s.logprob_chunk_positions, fits)


@dataclass(frozen=True)
class StepComposition:
    """What one optimizer step is made of, on each process and in all."""

    pairs_per_step: int
    pairs_per_process: int
    rollouts_per_step: int
    rollouts_per_process: int
    sampling_calls_per_process: int
    decode_steps_per_call: int
    tokens_per_sequence: int
    completion_tokens_per_step: int
    microbatches_per_process: int
    student_forwards: int
    recompute_forwards: int
    backwards: int
    teacher_forwards: int


def step_composition(s: StepSettings) -> StepComposition:
    """Pairs, rollouts, tokens, microbatches and passes of one step: each process takes
    ``ceil(pairs / N)`` pairs and ``n`` rollouts of each; the rollouts are sampled ``sequences_per_call`` at a
    time (``completion_tokens`` decode steps per call, at most) and trained ``sequences_per_microbatch`` at a
    time, each microbatch one student forward and backward (and, with gradient checkpointing, one more
    forward inside the backward) and, for OPCT, one teacher forward."""
    pairs_here = math.ceil(s.pairs_per_step / s.processes)
    rollouts_here = pairs_here * s.samples_per_pair
    microbatches = math.ceil(rollouts_here / s.sequences_per_microbatch)
    calls = math.ceil(rollouts_here / s.sequences_per_call) if s.on_policy else 0
    return StepComposition(
        pairs_per_step=s.pairs_per_step, pairs_per_process=pairs_here,
        rollouts_per_step=s.pairs_per_step * s.samples_per_pair, rollouts_per_process=rollouts_here,
        sampling_calls_per_process=calls, decode_steps_per_call=s.completion_tokens if s.on_policy else 0,
        tokens_per_sequence=s.prompt_tokens + s.completion_tokens,
        completion_tokens_per_step=s.pairs_per_step * s.samples_per_pair * s.completion_tokens,
        microbatches_per_process=microbatches, student_forwards=microbatches,
        recompute_forwards=microbatches if s.gradient_checkpointing else 0, backwards=microbatches,
        teacher_forwards=microbatches if s.on_policy else 0,
    )


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes per GPU of each part of a step (:data:`PARTS` names them), and the phases' peaks."""

    parts: dict[str, int]
    activations_without_checkpointing: int
    activations_with_checkpointing: int
    rollout_peak: int
    training_peak: int
    step_peak: int
    parameters: int
    trained_parameters: int

    @property
    def peak(self) -> int:
        """The step's peak: the largest phase."""
        return max(self.rollout_peak, self.training_peak, self.step_peak)

    def fits(self, gpu_bytes: float) -> bool:
        """Whether the peak is at most :data:`USABLE_SHARE` of ``gpu_bytes``."""
        return self.peak <= USABLE_SHARE * gpu_bytes


#: The parts of a plan, in the order they are printed, and in which phase each is held.
PARTS = {
    "weights": "both", "master_copy": "both", "optimizer": "both", "teacher": "both",
    "merged_lora_copy": "both", "gradients": "training and step",
    "activations": "training", "logits_chunks": "training", "optimizer_step": "step",
    "kv_cache": "rollouts", "static_cache": "rollouts", "sampling_logits": "rollouts", "gathered_for_sampling": "rollouts",
}


def master_copy_kept(s: StepSettings) -> bool:
    """Whether an fp32 master copy of the trained weights is stepped: ``fp32``, or ``auto`` when they are
    half precision; never when they are float32 already (a LoRA adapter is)."""
    trained_bytes = 4 if s.finetune == "lora" else s.weight_bytes
    return trained_bytes < 4 and s.master_weights in ("auto", "fp32")


def layer_activation_bytes(shape: ModelShape, s: StepSettings) -> int:
    """``A``, the bytes one decoder layer keeps per token for the backward (module docstring)."""
    b = s.activation_bytes
    heads = (shape.num_attention_heads + shape.num_key_value_heads) * shape.head_dim
    per_token = shape.norms_per_layer * (4 + 2 * b) * shape.hidden_size + 2 * b * heads
    per_token += (4 + b) * heads if shape.qk_norm else 0
    return per_token + 4 * b * shape.intermediate_size + (7 * b * s.lora_rank if s.finetune == "lora" else 0)


def activation_bytes(shape: ModelShape, s: StepSettings, checkpointing: bool) -> int:
    """The activations one microbatch keeps for its backward, with or without gradient checkpointing."""
    composition = step_composition(s)
    sequences = min(s.sequences_per_microbatch, max(composition.rollouts_per_process, 1))
    tokens = sequences * composition.tokens_per_sequence
    outside = (4 + 2 * s.activation_bytes) * shape.hidden_size  # the final norm
    layer = layer_activation_bytes(shape, s)
    if checkpointing:
        return tokens * (shape.num_hidden_layers * shape.hidden_size * s.activation_bytes + layer + outside)
    return tokens * (shape.num_hidden_layers * layer + outside)


def memory_plan(shape: ModelShape, s: StepSettings) -> MemoryPlan:
    """The per-GPU :class:`MemoryPlan` of one step of ``s`` on a model of ``shape`` (formulas: module docstring)."""
    params = parameter_count(shape)
    lora = s.finetune == "lora"
    trained = lora_parameter_count(shape, s.lora_rank, s.lora_targets) if lora else params
    shard = s.processes if s.fsdp else 1
    trained_bytes = 4 if lora else s.weight_bytes
    master = master_copy_kept(s)
    composition = step_composition(s)
    rows = min(s.sequences_per_call, composition.rollouts_per_process) if s.on_policy else 0
    merged = 0
    if lora and s.merged_lora_sampling:
        targets = [n for n in shape.linear_shapes() if s.lora_targets == "all-linear" or n in s.lora_targets]
        merged = shape.num_hidden_layers * sum(i * o for n, (i, o) in shape.linear_shapes().items() if n in targets)
    kv_per_token = shape.num_hidden_layers * 2 * shape.num_key_value_heads * shape.head_dim * s.activation_bytes
    parts = {
        "weights": (params * s.weight_bytes + (trained * 4 if lora else 0)) // shard,
        "master_copy": trained * 4 // shard if master else 0,
        "optimizer": 2 * trained * (4 if master else trained_bytes) // shard,
        "teacher": 0 if lora or not s.on_policy else params * s.weight_bytes // shard,
        "merged_lora_copy": merged * s.weight_bytes,
        "gradients": trained * trained_bytes // shard,
        "activations": activation_bytes(shape, s, s.gradient_checkpointing),
        "logits_chunks": logits_chunk(s, shape.vocab_size) * shape.vocab_size * (s.activation_bytes + 8)
                         * s.logits_copies,
        "static_cache": rows * static_capacity(s.prompt_tokens, s.completion_tokens) * kv_per_token
                        if s.static_decoder and s.on_policy else 0,
        "optimizer_step": trained * (8 if master else trained_bytes) // shard,
        "kv_cache": rows * (s.prompt_tokens if s.static_decoder else composition.tokens_per_sequence) * kv_per_token,
        "sampling_logits": rows * shape.vocab_size * 8,
        "gathered_for_sampling": params * s.weight_bytes - params * s.weight_bytes // shard if s.on_policy else 0,
    }
    both = sum(v for k, v in parts.items() if PARTS[k] == "both")
    return MemoryPlan(
        parts=parts,
        activations_without_checkpointing=activation_bytes(shape, s, False),
        activations_with_checkpointing=activation_bytes(shape, s, True),
        rollout_peak=both + sum(v for k, v in parts.items() if PARTS[k] == "rollouts"),
        training_peak=both + sum(v for k, v in parts.items() if PARTS[k].startswith("training")),
        step_peak=both + sum(v for k, v in parts.items() if PARTS[k].endswith("step")),
        parameters=params, trained_parameters=trained,
    )
