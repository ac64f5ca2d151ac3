"""Run configuration: a typed model read from YAML, with every default in one place.

Defaults follow the official OPCT code (research/papers.md §a) where it is known: LoRA rank 32,
8 prompts x 3 samples per step, temperature 1.0, sampled-token reverse KL with kl_coef 1.0 and no
discount, importance-sampling policy loss, Adam betas (0.9, 0.95), constant learning rate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelConfig(_Strict):
    """Which model to load and how."""

    name_or_path: str = "organism"
    revision: str | None = None
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    trust_remote_code: bool = False
    chat_template: str | None = Field(
        default=None, description="Jinja chat template (string or path to a file) for tokenizers without one."
    )
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    attn_implementation: str | None = None


class LoraConfig(_Strict):
    """PEFT LoRA settings (used when ``finetune: lora``)."""

    r: int = Field(32, gt=0)
    alpha: float = 32.0
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"


class GenerationConfig(_Strict):
    """How to generate: the one settings type of training rollouts, BCT targets, eval and the attacker.

    ``temperature: 0`` means greedy. Nothing is taken from the model's own ``generation_config``.
    """

    n: int = Field(1, gt=0, description="samples per prompt")
    temperature: float = Field(0.0, ge=0.0, description="0 = greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(512, gt=0)
    min_new_tokens: int = Field(0, ge=0)
    sequences_per_call: int = Field(64, gt=0, description="sequences per generate() call (memory, not results)")

    @model_validator(mode="after")
    def _check(self) -> GenerationConfig:
        if self.min_new_tokens > self.max_new_tokens:
            raise ValueError("min_new_tokens must not exceed max_new_tokens")
        return self


class SamplingConfig(_Strict):
    """Rollout sampling for OPCT (temperature 0 means greedy)."""

    n: int = Field(3, gt=0, description="samples per prompt")
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(1024, gt=0)
    min_new_tokens: int = Field(0, ge=0)
    batch_size: int = Field(64, gt=0, description="sequences per generate() call")


class LossConfig(_Strict):
    """The OPCT divergence between student (on ``prompt``) and frozen teacher (on ``teacher_prompt``)."""

    kind: Literal["sampled", "topk", "full"] = "sampled"
    kl_coef: float = 1.0
    kl_discount: float = Field(0.0, ge=0.0, le=1.0)
    policy_loss: Literal["importance_sampling", "ppo"] = "importance_sampling"
    clip_eps: float = Field(0.2, gt=0.0)
    topk: int = Field(20, gt=0)
    divergence: Literal["reverse_kl", "forward_kl", "jsd"] = "reverse_kl"
    jsd_beta: float = Field(0.5, gt=0.0, lt=1.0)
    chunk_size: int = Field(512, gt=0, description="completion positions per chunk for vocabulary-wide losses")


class BCTConfig(_Strict):
    """SFT consistency: targets are the frozen model's responses to ``teacher_prompt``, made once."""

    num_targets: int = Field(1, gt=0, description="responses per pair (k)")
    temperature: float = Field(0.0, ge=0.0, description="0 = greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(1024, gt=0)
    batch_size: int = Field(64, gt=0)


class AttackerConfig(_Strict):
    """GRPO training of a local attacker against one frozen target (``method: grpo_attack``).

    The model being trained is the attacker; ``data.train`` holds attacker instructions for *train*
    behaviours (e.g. ``organism:attacker:train``). Group size is ``sampling.n``, the clip range
    ``loss.clip_eps`` and the surrogate ``loss.policy_loss`` (use ``ppo``).
    """

    target: str = Field("organism", description="the frozen target: organism, a model folder, a run directory or hub id")
    judge: str = Field("organism", description="scorer name (opct.attack.scorers): organism, organism-refusal, rule, http:<model>")
    style: Literal["rewrite", "redteam"] = Field(
        "rewrite", description="how a reply becomes a prompt: rewrite = the whole reply; redteam = parsed JSON/PROMPT: line"
    )
    rounds: Literal[1] = Field(1, description="training episodes are single-round (reward = that round's score)")
    kl_beta: float = Field(0.1, ge=0.0, description="weight of the per-token KL to the run-start attacker")
    kl_estimator: Literal["k3", "log_ratio"] = Field(
        "k3", description="k3: beta*k3 loss term; log_ratio: -beta*(log pi_sampler - log pi_ref) added to each token's advantage"
    )
    threshold: float = Field(0.5, description="score at which an attempt counts as a crack (crack_rate in metrics)")
    target_max_new_tokens: int = Field(64, gt=0)
    target_batch_size: int = Field(64, gt=0)


class OptimConfig(_Strict):
    """AdamW and the learning-rate schedule."""

    lr: float = Field(5e-6, gt=0.0)
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.0
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    max_grad_norm: float | None = Field(1.0, gt=0.0)


class DataConfig(_Strict):
    """Where the consistency pairs come from."""

    train: list[str] = Field(default_factory=list, description="pair files or dataset folders")
    columns: dict[str, str] = Field(default_factory=dict, description="contract name -> source field name")
    split: str | None = None
    axes: list[str] | None = Field(default=None, description="keep only these axes")
    shuffle: bool = True

    @field_validator("train", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class TrainConfig(_Strict):
    """Steps, batch sizes, checkpoints and logging."""

    epochs: float = Field(1.0, gt=0.0)
    max_steps: int | None = Field(None, gt=0, description="overrides epochs when set")
    batch_size: int = Field(8, gt=0, description="prompts per optimizer step, over all processes")
    micro_batch_size: int = Field(8, gt=0, description="sequences per forward/backward on one process")
    mixed_precision: Literal["no", "bf16", "fp16"] = "no"
    checkpoint_every: int = Field(20, gt=0)
    keep_checkpoints: int = Field(2, gt=0)
    log_rollouts: bool = True
    share_prompt_prefix: bool = Field(True, description="encode each prompt once for all its samples (KV cache)")
    trackers: list[Literal["tensorboard", "wandb", "trackio"]] = Field(default_factory=list)


class RunConfig(_Strict):
    """A whole training run."""

    name: str = "run"
    output_dir: str = "runs"
    method: Literal["opct", "bct", "grpo_attack"] = "opct"
    seed: int = 0
    finetune: Literal["lora", "full"] = "lora"
    model: ModelConfig = Field(default_factory=ModelConfig)
    lora: LoraConfig = Field(default_factory=LoraConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    bct: BCTConfig = Field(default_factory=BCTConfig)
    attacker: AttackerConfig = Field(default_factory=AttackerConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        if self.sampling.min_new_tokens > self.sampling.max_new_tokens:
            raise ValueError("sampling.min_new_tokens must not exceed sampling.max_new_tokens")
        if self.method == "grpo_attack" and self.sampling.n < 2:
            raise ValueError("grpo_attack standardises rewards within a behaviour's group: set sampling.n >= 2")
        return self

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir) / self.name


class ConfigError(ValueError):
    """A configuration problem, worded for the person who wrote the file."""


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for key in keys[:-1]:
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {dotted}: '{key}' is not a section")
        node = child
    node[keys[-1]] = value


def parse_overrides(items: list[str]) -> list[tuple[str, Any]]:
    """Parse ``key.sub=value`` strings; values are read as YAML (numbers, booleans, lists...)."""
    out = []
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set optim.lr=1e-5")
        key, raw = item.split("=", 1)
        out.append((key.strip(), yaml.safe_load(raw) if raw.strip() else ""))
    return out


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            lines.append(f"  {loc}: unknown key; check its spelling (`opct train --print-config` lists every key)")
        else:
            lines.append(f"  {loc}: {e['msg']} (got {e.get('input')!r})")
    return "\n".join(lines)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run configuration, apply ``--set`` overrides, and validate it.

    Unknown or mistyped keys are errors that name the key.
    """
    tree: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as err:
            raise ConfigError(f"config file not found: {path}") from err
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML: {err}") from err
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of settings")
        tree = loaded or {}
    for key, value in parse_overrides(overrides or []):
        _set_path(tree, key, value)
    try:
        return RunConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def dump_config(cfg: RunConfig) -> dict[str, Any]:
    """The resolved configuration as plain data (for manifests)."""
    return cfg.model_dump(mode="json")
