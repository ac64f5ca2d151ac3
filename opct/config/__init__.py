"""Run configuration: a typed model read from YAML, with every default in one place.

Defaults follow the official OPCT code (arXiv 2605.21834) where it is known: LoRA rank 32,
8 prompts x 3 samples per step, temperature 1.0, sampled-token reverse KL with kl_coef 1.0 and no
discount, importance-sampling policy loss, Adam betas (0.9, 0.95), constant learning rate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from opct.config.files import (
    ConfigError,
    ConfigSource,
    _format_validation_error,
    apply_overrides,
    parse_overrides,
    read_config_file,
    set_dotted,
    switch_method,
    validate_config,
)
from opct.config.generation import (
    AxisTargets,
    GenerationConfig,
    RolloutSettings,
    SamplingConfig,
    TargetConfig,
    TargetSettings,
    generation_settings,
)
from opct.config.lora import LoraConfig
from opct.config.method_registry import METHODS
from opct.config.names import FolderName, PathComponent, check_folder_name, check_path_component
from opct.config.ranges import AnyValue, CheckedBy, DeclaredRanges, Why
from opct.config.strict import MAX_EPOCHS, MAX_STEPS, MAX_TEMPERATURE, StrictSettings, _Strict
from opct.registry import Registry

#: Short model names mapped to a function returning a local folder; the organism layer registers
#: ``organism`` (the shipped checkpoint). Any other name is a folder, a run directory or a hub id.
MODEL_ALIASES: Registry = Registry("model alias")


class ModelConfig(_Strict):
    """One model spec, used by training, eval, the attacker and experiments alike: which weights, and
    how prompts are rendered for them. A trained checkpoint records it, so evaluating it later renders
    exactly the token ids training used."""

    name_or_path: str = Field("organism", description="the weights: a model alias (organism, organism-qwen3, organism-gpt2), a local folder, a run directory or a hub id")
    revision: str | None = Field(None, description="hub revision (a commit, tag or branch) of a hub id; None: main. Pin one for a reproducible run")
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field("float32", description="dtype the weights load in; auto: the checkpoint's own")
    device: str | None = Field(None, description="cpu, cuda, cuda:1, ...; None = an accelerator if present, else cpu")
    trust_remote_code: bool = Field(False, description="run the model repository's own Python code (a checkpoint's files never turn it on)")
    chat_template: str | None = Field(
        default=None, description="Jinja chat template (string or path to a .jinja file) for tokenizers without one."
    )
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict, description="e.g. {enable_thinking: false}")
    system_prompt: str | None = Field(None, description="system message put before every prompt (merged into one it has)")
    attn_implementation: str | None = Field(None, description="transformers' attn_implementation (eager, sdpa, flash_attention_2); None: its default")


#: An Adam moment's decay: torch's AdamW takes [0, 1) (1 would never forget, and divides by 1 - beta^t = 0).
_Beta = Annotated[float, Field(ge=0.0, lt=1.0)]


class OptimConfig(_Strict):
    """AdamW and the learning-rate schedule."""

    lr: float = Field(5e-6, gt=0.0, allow_inf_nan=False, description="peak learning rate of AdamW")
    betas: tuple[_Beta, _Beta] = Field((0.9, 0.95), description="AdamW's (beta1, beta2), each in [0, 1)")
    eps: float = Field(1e-8, ge=0.0, allow_inf_nan=False, description="AdamW's epsilon")
    weight_decay: float = Field(0.0, ge=0.0, allow_inf_nan=False, description="AdamW's decoupled weight decay")
    schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="learning rate after warmup: constant, or decayed to 0 at the last step (linear, cosine)")
    warmup_steps: int = Field(0, ge=0, description="steps of linear warmup from 0 to lr")
    max_grad_norm: float | None = Field(1.0, gt=0.0, allow_inf_nan=False, description="clip the gradient's global norm to this; None: no clipping (the norm is still logged)")
    master_weights: Literal["auto", "fp32", "off"] = Field(
        "auto",
        description="keep an fp32 master copy of the trained weights and step it, writing the result back in the "
                    "model's dtype: auto: whenever a trained weight is bf16 or fp16 (full fine-tuning in half "
                    "precision, where small updates would round away); fp32: always; off: step the weights as they are",
    )

    @field_validator("master_weights", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML reads a bare `off` as false


class DataConfig(_Strict):
    """Where the consistency pairs come from."""

    train: list[str] = Field(default_factory=list, description="pair files or dataset folders")
    columns: dict[str, str] = Field(default_factory=dict, description="contract name -> the source's field name, e.g. {prompt: biased_question, teacher_prompt: question, id: uid}")
    split: str | None = Field(None, description="split of a dataset folder or hub id with several; None: its only one")
    axes: list[str] | None = Field(default=None, description="keep only these axes")
    shuffle: bool = Field(True, description="each epoch a seeded permutation of the pairs (false: file order)")
    max_prompt_tokens: int | None = Field(
        None, gt=0, description="refuse a prompt or teacher_prompt longer than this many tokens as rendered (None: only "
                                "the model's positions limit it, with the generated tokens)",
    )
    too_long: Literal["error", "drop"] = Field(
        "error", description="a pair too long for max_prompt_tokens or the model's positions: error (name each), or "
                             "drop it with a warning counting them",
    )
    allow_special_tokens: bool = Field(
        False, description="accept prompts holding the tokenizer's special-token text (<|im_start|>...), which the "
                           "tokenizer turns into control tokens; off: such pairs are refused (a warning when on)",
    )
    allow_heldout_training: bool = Field(
        False, description="train on pairs whose meta.split is heldout (off: they are refused, held-out data is for eval)"
    )
    validation: list[str] = Field(
        default_factory=list,
        description="validation pair sources (e.g. organism:sycophancy:val): measured during training, never trained on",
    )

    @field_validator("train", "validation", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class ValidationConfig(_Strict):
    """Measuring the policy on the validation pairs (``data.validation``) while it trains
    (:mod:`opct.training.validation`): once before the first step, then every ``every`` steps."""

    every: int | None = Field(None, gt=0, description="steps between measurements; None: no validation")
    pairs_per_axis: int = Field(48, gt=0, description="a seeded sample of each axis's validation pairs")
    samples: Annotated[
        GenerationConfig,
        BeforeValidator(lambda v: {"n": 2, "temperature": 1.0, "max_new_tokens": 256, **v} if isinstance(v, dict) else v),
        Field(default_factory=lambda: GenerationConfig(n=2, temperature=1.0, max_new_tokens=256),
              description="the student's own samples the teacher-KL is measured on (temperature 1: its policy)"),
    ]
    answers: GenerationConfig = Field(
        default_factory=lambda: GenerationConfig(max_new_tokens=256),
        description="the greedy answers the judge and the capability probe read",
    )
    judge: str | None = Field(None, description="registered behaviour judge (organism); None: no good-behaviour rate")
    capability: str | None = Field(None, description="registered capability probe (organism); None: none")


class ProfileConfig(_Strict):
    """The off-policy profile (:mod:`opct.diagnostics.offpolicy`), measured once when a run starts, on a
    seeded sample of its training pairs, into ``diagnostics.json`` and the run manifest. Off by default (it
    generates before step 1); the organism's experiments turn it on (docs/training.md, "The run's start")."""

    pairs_per_axis: int = Field(0, ge=0, description="training pairs sampled per axis; 0 (the default) skips the "
                                                     "profile, which generates before step 1; the organism's "
                                                     "experiments set 8 (docs/training.md, the run's start)")
    max_new_tokens: int | None = Field(
        None, gt=0, description="longest target, answer and sample; None: the method's own generation length "
                                "(validation.answers' for a method that generates nothing)",
    )


class TrainConfig(_Strict):
    """Steps, batch sizes (each name says its unit), checkpoints and logging."""

    epochs: float = Field(1.0, gt=0.0, le=MAX_EPOCHS, allow_inf_nan=False, description="passes over the pairs: steps = ceil(epochs * pairs / pairs_per_step)")
    max_steps: int | None = Field(None, gt=0, le=MAX_STEPS, description="overrides epochs when set")
    pairs_per_step: int = Field(8, gt=0, description="consistency pairs per optimizer step, over all processes")
    sequences_per_microbatch: int = Field(8, gt=0, description="completions per forward/backward on one process")
    logprob_chunk_positions: int = Field(
        512, gt=0, description="completion positions per chunk when taking log-softmax over the vocabulary"
    )
    whole_logits_max_mib: float = Field(
        64.0, gt=0.0, allow_inf_nan=False,
        description="the largest logits tensor built, in MiB of float32: a microbatch's [rows, length, vocab] logits "
                    "are built whole when they fit; above it they come from the final hidden states in chunks of "
                    "logprob_chunk_positions positions (fewer where that many would not fit), forward and backward",
    )
    mixed_precision: Literal["no", "bf16", "fp16"] = Field("no", description="accelerate's autocast: no, bf16 or fp16 (with a loss scaler)")
    checkpoint_every: int = Field(20, gt=0, description="steps between checkpoints (checkpoints/step-N/; the last step is always saved)")
    keep_checkpoints: int = Field(2, gt=0, description="newest checkpoints kept; older ones are deleted")
    log_rollouts: bool = Field(True, description="write every sampled completion to rollouts.jsonl.gz (OPCT, GRPO)")
    share_prompt_prefix: bool = Field(True, description="encode each prompt once for all its samples (KV cache)")
    merged_lora_sampling: Literal["auto"] | bool = Field(
        "auto",
        description="LoRA: sample rollouts from a copy with each adapted weight merged (W + scale*BA), refreshed every "
                    "step: faster decoding, one more copy of the adapted weights in memory (opct/sampling/merged_lora.py). "
                    "auto: merged on CUDA with whole weights per process (not FSDP, not vllm), said once; not on CPU, "
                    "where it would change the rollouts' rounding",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="recompute each decoder layer's activations in the backward pass instead of keeping them "
                    "(transformers' gradient checkpointing, non-reentrant): less memory, about a third more compute",
    )
    disable_dropout: bool = Field(
        True, description="zero the base model's dropout (on-policy ratios need it; lora.dropout is kept)"
    )
    trackers: list[Literal["tensorboard", "wandb", "trackio"]] = Field(default_factory=list, description="experiment trackers that also get the metrics (like TRL's report_to), written under the run's trackers/; metrics.jsonl is always written")
    tracker_project: PathComponent | None = Field(None, description="the trackers' project (W&B project, TensorBoard folder trackers/<project>); None: opct. The run is named after name")
    tracker_entity: PathComponent | None = Field(None, description="W&B entity (team or user); None: W&B's default")
    tracker_tags: list[PathComponent] = Field(default_factory=list, description="W&B tags of the run")
    on_nonfinite: Literal["stop", "skip"] = Field(
        "stop", description="a non-finite loss or gradient norm: stop the run (exit 1; checkpoints before it kept), or "
                            "skip that step's update and count it (nonfinite_skipped in metrics.jsonl)",
    )

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value: Any) -> Any:
        return "no" if value is False else value  # YAML reads a bare `no` as false

    @model_validator(mode="after")
    def _skip_without_scaler(self) -> TrainConfig:
        if self.on_nonfinite == "skip" and self.mixed_precision == "fp16":
            raise ValueError("on_nonfinite: skip with mixed_precision: fp16: fp16's loss scaler already skips a step "
                             "with a non-finite gradient; use on_nonfinite: stop")
        return self


class RunConfig(_Strict):
    """A whole training run.

    The method's own settings sit in a section named after it (``opct:``, ``bct:``, or a registered
    method's name); a section for another method is an error, never silently ignored.
    """

    name: FolderName = Field("run", description="the run's folder name: its outputs go to <output_dir>/<name>")
    output_dir: str = Field("runs", description="the folder that holds run directories")
    method: str = Field(default_factory=lambda: METHODS.default, description="training method: opct, bct, act or another registered one; its settings sit in the section of its name")
    seed: Annotated[int, AnyValue("a seed: every integer is one")] = Field(0, description="seed of the pair order, sampling and initialisation")
    finetune: Literal["lora", "full"] = Field("lora", description="lora: train a LoRA adapter (lora:); full: every weight")
    model: ModelConfig = Field(default_factory=ModelConfig, description="the model trained (and, frozen at run start, the teacher)")
    lora: LoraConfig = Field(default_factory=LoraConfig, description="the adapter (finetune: lora)")
    data: DataConfig = Field(default_factory=DataConfig, description="the consistency pairs")
    optim: OptimConfig = Field(default_factory=OptimConfig, description="the optimizer and learning-rate schedule")
    train: TrainConfig = Field(default_factory=TrainConfig, description="steps, batches, checkpoints, logging")
    validation: ValidationConfig = Field(default_factory=ValidationConfig, description="measurements on validation pairs while training")
    profile: ProfileConfig = Field(default_factory=ProfileConfig, description="the off-policy profile measured once at the run's start")
    threads: int | None = Field(
        None, gt=0, description="CPU threads for torch (--threads and OPCT_THREADS override it; None: torch's default)"
    )
    _method_config: Any = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _method_section(cls, data: Any, handler: Any) -> RunConfig:
        if not isinstance(data, dict):
            return handler(data)
        data = dict(data)
        method = data.get("method", METHODS.default)
        if not isinstance(method, str) or method not in METHODS:
            raise ValueError(f"method {method!r} is not registered; choose one of: {', '.join(METHODS.names())}")
        strays = [k for k in data if k in METHODS and k != method]
        if strays:
            stray = data[strays[0]]
            keys = ", ".join(f"{strays[0]}.{k}" for k in stray) if isinstance(stray, dict) and stray else strays[0]
            raise ValueError(
                f"section {strays[0]!r} configures method {strays[0]!r}, but this run's method is {method!r}: "
                f"{keys} do not apply to {method}; remove them, or change method"
            )
        section = data.pop(method, None) or {}
        cfg = handler(data)
        if cfg.train.merged_lora_sampling is True and cfg.finetune != "lora":
            raise ValueError("train.merged_lora_sampling merges a LoRA adapter for sampling; it needs finetune: lora")
        if cfg.finetune == "lora" and not cfg.lora.merges_as_plain_lora:
            _check_unmerged_sampling(cfg, method, section)
        try:
            cfg._method_config = METHODS.get(method).config_class.model_validate(section)
        except ValidationError as err:
            raise ValidationError.from_exception_data(
                cls.__name__,
                [
                    {"type": e["type"], "loc": (method, *e["loc"]), "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e else {})}
                    for e in err.errors()
                ],
            ) from None
        return cfg

    @model_serializer(mode="wrap")
    def _dump_with_section(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if self._method_config is not None:
            out[self.method] = self._method_config.model_dump(mode="json")
        return out

    @property
    def method_config(self) -> Any:
        """The validated settings section of ``method`` (e.g. :class:`OPCTConfig`)."""
        return self._method_config

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir) / self.name


def _check_unmerged_sampling(cfg: RunConfig, method: str, section: dict[str, Any]) -> None:
    """Refuse the samplers that merge the adapter as plain LoRA (``train.merged_lora_sampling``, the vllm engine)
    when ``lora.use_dora`` or ``lora.modules_to_save`` makes it something a plain merge does not compute."""
    why = "lora.use_dora" if cfg.lora.use_dora else "lora.modules_to_save"
    if cfg.train.merged_lora_sampling is True:  # auto samples through such an adapter (merged_sampling_copy)
        raise ValueError(f"train.merged_lora_sampling merges plain LoRA only, and {why} is set: set "
                         f"train.merged_lora_sampling: false, or drop {why}")
    for key, value in section.items():
        if isinstance(value, dict) and value.get("engine") == "vllm":
            raise ValueError(f"{method}.{key}.engine: vllm loads the adapter merged as plain LoRA, and {why} is set: "
                             f"use engine: hf, or drop {why}")


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run configuration, apply ``--set`` overrides, and validate it.

    Unknown or mistyped keys are errors that name the key. An override of ``method`` switches the
    method: the file's section for its old method is dropped with a one-line warning naming its keys
    (:func:`~opct.config.files.switch_method`); a section for a method other than the run's is an error.
    """
    tree, source = read_config_file(path)
    file_method = tree.get("method", METHODS.default)
    source = apply_overrides(tree, source, overrides or [])
    switch_method(tree, file_method, [key for key, _ in parse_overrides(overrides or [])], METHODS.names())
    return validate_config(RunConfig, tree, source)


def dump_config(cfg: RunConfig) -> dict[str, Any]:
    """The resolved configuration as plain data (for manifests)."""
    return cfg.model_dump(mode="json")


__all__ = [
    "MAX_EPOCHS", "MAX_STEPS", "MAX_TEMPERATURE", "MODEL_ALIASES", "AnyValue", "AxisTargets", "CheckedBy", "ConfigError", "ConfigSource", "DeclaredRanges", "FolderName", "GenerationConfig", "LoraConfig", "ModelConfig", "OptimConfig", "PathComponent",
    "ProfileConfig", "RolloutSettings", "RunConfig", "SamplingConfig", "StrictSettings", "TargetConfig", "TargetSettings", "Why", "_format_validation_error", "apply_overrides", "check_folder_name", "check_path_component",
    "dump_config", "generation_settings", "load_config", "parse_overrides", "read_config_file", "set_dotted", "validate_config",
]
