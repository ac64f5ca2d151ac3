"""The LoRA adapter's settings (``lora:``), passed through to PEFT."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from opct.config.ranges import Why
from opct.config.strict import _Strict


class LoraConfig(_Strict):
    """PEFT LoRA settings (used when ``finetune: lora``), passed to ``peft.LoraConfig`` under PEFT's own names
    where they differ (``alpha``: ``lora_alpha``, ``dropout``: ``lora_dropout``).

    Under LoRA the frozen teacher is the policy with its adapter switched off, so an adapter must start as a
    no-op on unchanged base weights: ``init_lora_weights`` takes only the initialisations that keep ``B = 0``
    and leave the base as loaded (PiSSA, OLoRA, EVA, LoftQ and CorDA rewrite the base weights)."""

    r: int = Field(32, gt=0, description="LoRA rank (the official OPCT code's 32)")
    alpha: Annotated[float, Why("the update is (alpha / r) B A: alpha 0 makes it 0, so the adapter trains nothing "
                                "and stays the base model; a negative alpha only flips B's sign")] = Field(
        32.0, gt=0.0, description="LoRA scale numerator: the update is (alpha / r) * B A (alpha / sqrt(r) with use_rslora)")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on the LoRA path only (kept even with train.disable_dropout)")
    target_modules: list[str] | Literal["all-linear"] = Field("all-linear", description="module names to adapt, or all-linear (every linear layer but the output head)")
    use_rslora: bool = Field(False, description="rank-stabilised LoRA: scale the update by alpha / sqrt(r) instead of alpha / r")
    use_dora: bool = Field(
        False, description="DoRA: train each adapted weight's magnitude apart from its LoRA direction (slower; not with "
                           "train.merged_lora_sampling or the vllm engine, which merge plain LoRA only)",
    )
    modules_to_save: list[str] = Field(
        default_factory=list,
        description="modules trained in full beside the adapter and saved with it (e.g. [lm_head]); the teacher keeps "
                    "their original weights (not with train.merged_lora_sampling or the vllm engine)",
    )
    init_lora_weights: Literal[True, "gaussian"] = Field(
        True, description="the adapter's A matrix: true (PEFT's default, Kaiming-uniform) or gaussian; B starts at 0 "
                          "either way, so the policy starts as the teacher",
    )

    @field_validator("target_modules")
    @classmethod
    def _adapts_something(cls, value: list[str] | str) -> list[str] | str:
        if value == []:
            raise ValueError("an empty list adapts no module, so the run would train 0 parameters: name the modules to "
                             "adapt (e.g. [q_proj, v_proj]), or all-linear (every linear layer but the output head)")
        return value

    @field_validator("init_lora_weights", mode="before")
    @classmethod
    def _keeps_the_teacher(cls, value: Any) -> Any:
        if value is True or value == "gaussian":
            return value
        raise ValueError(
            f"{value!r}: opct's teacher is the base with the adapter switched off, so the adapter must start at zero on "
            "the base weights as loaded; use true or gaussian (false starts the adapter away from the teacher; pissa, "
            "olora, eva, loftq and corda rewrite the base weights)"
        )

    def peft_kwargs(self) -> dict[str, Any]:
        """These settings as ``peft.LoraConfig`` keyword arguments."""
        return {"r": self.r, "lora_alpha": self.alpha, "lora_dropout": self.dropout, "target_modules": self.target_modules,
                "use_rslora": self.use_rslora, "use_dora": self.use_dora,
                "modules_to_save": list(self.modules_to_save) or None, "init_lora_weights": self.init_lora_weights}

    @property
    def merges_as_plain_lora(self) -> bool:
        """Whether a merged copy (``W + scale * B A``) computes this adapter: no DoRA, no module trained in full."""
        return not self.use_dora and not self.modules_to_save


def merges_for_sampling(setting: Literal["auto"] | bool, *, plain_lora: bool, sharded: bool, vllm: bool,
                        cuda: bool) -> bool:
    """``train.merged_lora_sampling``'s rule: whether rollouts sample from a merged copy of the LoRA policy.

    ``True``/``False`` decide alone; ``auto`` merges a plain LoRA adapter (no DoRA, no ``modules_to_save``) on
    CUDA when its process holds the whole weights (not FSDP) and the hf engine samples (vLLM merges by itself).
    Read at run time by :func:`opct.sampling.merged_lora.merged_sampling_copy` and, for its memory estimate, by
    the dry run's plan (:mod:`opct.training.memory_plan`).
    """
    if setting is True or setting is False:
        return setting
    return plain_lora and cuda and not sharded and not vllm
