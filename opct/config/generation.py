"""How to generate: one settings type for training rollouts, BCT targets, evaluation and the attacker."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from opct.config.strict import MAX_TEMPERATURE, _Strict


class GenerationConfig(_Strict):
    """How to generate: the one settings type of training rollouts, BCT targets, eval and the attacker.

    ``temperature: 0`` means greedy. Nothing is taken from the model's own ``generation_config``.
    """

    n: int = Field(1, gt=0, description="samples per prompt")
    temperature: float = Field(0.0, ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False, description="0 = greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling: keep the smallest token set of this much probability (1: all)")
    max_new_tokens: int = Field(512, gt=0, description="tokens generated at most; a completion cut here counts as truncated")
    min_new_tokens: int = Field(0, ge=0, description="end-of-sequence is blocked before this many tokens")
    sequences_per_call: int = Field(64, gt=0, description="sequences per generate() call (memory, not results)")

    @model_validator(mode="after")
    def _check(self) -> GenerationConfig:
        if self.min_new_tokens > self.max_new_tokens:
            raise ValueError("min_new_tokens must not exceed max_new_tokens")
        return self


class SamplingConfig(GenerationConfig):
    """A :class:`GenerationConfig` and its engine (rollouts, BCT targets): ``hf`` (:class:`opct.sampling.hf_sampler.HFSampler`)
    or ``vllm`` (:mod:`opct.sampling.vllm_sampler`, ``pip install 'opct[vllm]'``); ``vllm_*`` keys are refused with ``hf``."""

    engine: Literal["hf", "vllm"] = Field("hf", description="hf: the model's own forward (CPU or GPU); vllm: a colocated vLLM engine (GPU, opct[vllm])")
    decoder: Literal["auto", "plain", "static"] = Field(
        "auto",
        description="hf engine's decoder: static = fixed-shape steps (static KV cache, CUDA graphs on a GPU), used "
                    "after its self-check against plain; plain = a cache that grows each step; auto = static on "
                    "CUDA, plain on CPU (where static is not faster: docs/training.md, The decoder)",
    )
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0.0, lt=1.0, description="share of the GPU's memory vLLM takes")
    vllm_engine_args: dict[str, Any] = Field(default_factory=dict, description="more vllm.LLM arguments (max_model_len...)")

    @model_validator(mode="after")
    def _engine_keys(self) -> SamplingConfig:
        defaults = {k: f.get_default(call_default_factory=True) for k, f in type(self).model_fields.items()}
        used = [k for k in defaults if k.startswith("vllm_") and getattr(self, k) != defaults[k]]
        if used and self.engine == "hf":
            raise ValueError(f"{', '.join(used)} set, but engine is hf: remove it, or set engine: vllm")
        if self.engine == "vllm" and self.decoder != "auto":
            raise ValueError(f"decoder: {self.decoder} is the hf engine's; vllm decodes itself: remove it, or set engine: hf")
        return self


def generation_settings(config_class: type[GenerationConfig] = GenerationConfig, **defaults: Any) -> Any:
    """A ``config_class`` (:class:`GenerationConfig`) field type whose unset keys take ``defaults``, not the class's.

    ``sampling: {n: 2}`` under OPCT keeps OPCT's temperature 1.0 instead of falling back to the
    class default (greedy): a section only overrides the keys it names.
    """

    def merge(value: Any) -> Any:
        return {**defaults, **value} if isinstance(value, dict) else value

    return Annotated[
        config_class,
        BeforeValidator(merge),
        Field(default_factory=lambda: config_class(**defaults)),
    ]


#: OPCT rollouts: the official code's 3 samples per prompt at temperature 1.
RolloutSettings = generation_settings(SamplingConfig, n=3, temperature=1.0, max_new_tokens=1024)


class AxisTargets(_Strict):
    """One axis's own BCT target settings: each key it names replaces ``bct.targets``'s for that axis's pairs."""

    n: int | None = Field(None, gt=0, description="targets per pair of this axis, each one SFT example (None: bct.targets.n)")
    temperature: float | None = Field(None, ge=0.0, description="0 = greedy (None: bct.targets.temperature)")
    top_p: float | None = Field(None, gt=0.0, le=1.0, description="nucleus mass when sampling (None: bct.targets.top_p)")


class TargetConfig(SamplingConfig):
    """BCT's target settings: a :class:`SamplingConfig` for every pair, and ``per_axis`` overrides.

    The official code samples the safety-awareness targets (3 per prompt at temperature 1) and takes
    greedy answers elsewhere: ``per_axis: {awareness: {n: 3, temperature: 1.0}}``."""

    per_axis: dict[str, AxisTargets] = Field(
        default_factory=dict,
        description="axis name -> {n, temperature, top_p} for that axis's pairs (an axis not named uses the keys above)",
    )

    def for_axis(self, axis: str) -> TargetConfig:
        """The settings one axis's pairs get: these, with ``per_axis[axis]``'s keys in place, and no ``per_axis``."""
        override = self.per_axis.get(axis)
        update = {k: v for k, v in (override.model_dump() if override else {}).items() if v is not None}
        return self.model_copy(update={**update, "per_axis": {}})


#: BCT targets: one greedy response per pair, unless ``per_axis`` says otherwise.
TargetSettings = generation_settings(TargetConfig, n=1, temperature=0.0, max_new_tokens=1024)
