"""A LoRA policy's sampling copy: the same function with every adapted weight merged, ``W + scale * B A``.

Under LoRA each adapted linear layer costs three matrix products (``W x``, ``A x``, ``B (A x)``) and
PEFT's dispatch around them. Decoding runs that for a handful of rows per step, where the fixed cost
of each product dominates. :class:`MergedLoraModel` is a plain (non-PEFT) model of the base class
whose adapted layers hold one merged weight each; every other parameter and buffer is the policy's own
tensor, shared, not copied. :meth:`MergedLoraModel.refresh` recomputes the merged weights from the
current adapter (after each optimizer step), so samples come from the current policy. The extra memory
is one copy of the adapted weights.

Log-probabilities under the merged weights equal the adapter's up to float rounding (the sum is taken
before the product instead of after); ``train.merged_lora_sampling`` turns this on for OPCT's rollouts
(:func:`merged_sampling_copy`: by default on CUDA only, so that CPU rollouts keep their bits).
The training model is never modified: PEFT's own in-place ``merge_adapter``/``unmerge_adapter`` would
leave rounding residue in the base weights, which under LoRA are the frozen teacher.

:func:`merged_weights` yields the same merged weights one at a time under the base model's names, for an
engine that keeps its own copy of the weights (``sampling.engine: vllm``, :mod:`opct.sampling.vllm_sampler`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Literal

import torch
from torch import nn

from opct.config.lora import merges_for_sampling
from opct.errors import OpctWarning


class MergeError(ValueError):
    """A PEFT model that cannot be merged for sampling (not plain LoRA on linear layers)."""


class MergedLoraModel:
    """A plain copy of ``peft_model``'s architecture for sampling, sharing every tensor but the adapted weights."""

    def __init__(self, peft_model: nn.Module):
        from peft.tuners.lora import LoraLayer

        base = peft_model.get_base_model()
        self.lora_layers: list[tuple[str, LoraLayer]] = []
        state: dict[str, torch.Tensor] = {}
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer):
                self._check(name, module)
                self.lora_layers.append((name, module))
        adapted = {f"{name}.base_layer.weight" for name, _ in self.lora_layers}
        for name, param in base.named_parameters():
            if ".lora_" in name or name in adapted:
                continue
            if param.requires_grad:
                raise MergeError(f"trainable parameter {name} outside the LoRA matrices (modules_to_save?): "
                                 "merged sampling supports plain LoRA only; set train.merged_lora_sampling: false")
            state[name.replace(".base_layer.", ".")] = param
        self.merged: list[nn.Parameter] = []
        for name, module in self.lora_layers:
            weight = module.get_base_layer().weight
            linear = isinstance(module.get_base_layer(), nn.Linear)  # GPT-2's Conv1D holds [in, out] already
            merged = nn.Parameter(_decode_layout(weight) if linear else torch.empty_like(weight), requires_grad=False)
            self.merged.append(merged)
            state[f"{name}.weight"] = merged
            bias = module.get_base_layer().bias
            if bias is not None:
                state[f"{name}.bias"] = bias
        with torch.device("meta"):
            self.model = type(base)(base.config)
        # ``assign=True`` gives each assigned tensor the module's ``requires_grad``: left at True it would
        # switch on gradients for the policy's own frozen tensors (norms, embeddings, output layer).
        self.model.requires_grad_(False)
        missing, unexpected = self.model.load_state_dict(state, strict=False, assign=True)
        if unexpected or [k for k in missing if k not in _tied(self.model)]:
            raise MergeError(f"cannot rebuild {type(base).__name__} for merged sampling: missing {missing}, "
                             f"unexpected {unexpected}")
        if getattr(self.model.config, "tie_word_embeddings", False):
            self.model.tie_weights()
        for name, buf in base.named_buffers():  # non-persistent buffers (rotary frequencies) are not in a state dict
            owner, _, attr = name.replace(".base_layer.", ".").rpartition(".")
            setattr(self.model.get_submodule(owner) if owner else self.model, attr, buf)
        self.model.eval()
        self.refresh()

    @staticmethod
    def _check(name: str, module: nn.Module) -> None:
        active = list(module.active_adapters)
        if len(active) != 1 or getattr(module, "use_dora", {}).get(active[0], False):
            raise MergeError(f"{name}: merged sampling needs exactly one active plain LoRA adapter (no DoRA)")
        if not isinstance(module.get_base_layer(), nn.Linear) and not hasattr(module, "fan_in_fan_out"):
            raise MergeError(f"{name}: merged sampling supports LoRA on linear layers only")

    @torch.no_grad()
    def refresh(self) -> None:
        """Set every merged weight to the adapter's current ``W + scale * B A`` (after an optimizer step)."""
        for merged, (_, module) in zip(self.merged, self.lora_layers, strict=True):
            (adapter,) = module.active_adapters
            merged.copy_(module.get_base_layer().weight + module.get_delta_weight(adapter).to(merged.dtype))


def merged_sampling_copy(policy: nn.Module, setting: Literal["auto"] | bool, *, sharded: bool,
                         vllm: bool) -> MergedLoraModel | None:
    """The merged sampling copy ``train.merged_lora_sampling`` (``setting``) asks for, or ``None`` (sample from
    ``policy`` itself).

    ``True``: always (:class:`MergeError` if ``policy`` cannot be merged). ``auto``: where merging is the same
    function and pays: a plain LoRA ``policy`` on CUDA whose process holds the whole weights (one process, or a
    DDP rank; not FSDP) and the hf engine (vLLM merges by itself); said once per process (:class:`OpctWarning`).
    Not on a CPU: there the merged weights round differently from the adapter's, and the organism's rollouts,
    hence its quick demo's numbers, would move (docs/training.md, "The decoder").
    """
    if setting is True:
        return MergedLoraModel(policy)
    adapter = hasattr(policy, "get_base_model")
    if setting != "auto" or not merges_for_sampling(setting, plain_lora=adapter, sharded=sharded, vllm=vllm,
                                                    cuda=adapter and _on_cuda(policy)):
        return None
    try:
        merged = MergedLoraModel(policy)
    except MergeError:  # DoRA, modules_to_save...: the adapter samples as it is
        return None
    global _SAID_MERGED
    if not _SAID_MERGED:
        _SAID_MERGED = True
        warnings.warn(OpctWarning(f"rollouts are sampled from a merged copy of the LoRA policy ({len(merged.merged)} "
                                  "adapted weights, refreshed every step; train.merged_lora_sampling: auto, "
                                  "set it to false to sample through the adapter)"), stacklevel=2)
    return merged


#: Whether :func:`merged_sampling_copy` has said in this process that it merged.
_SAID_MERGED = False


def _on_cuda(model: nn.Module) -> bool:
    return next(model.parameters()).device.type == "cuda"


@torch.no_grad()
def merged_weights(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``model``'s parameters under the base model's names, each LoRA-adapted weight merged (``W + scale * B A``).

    For pushing a policy into an inference engine (:meth:`opct.sampling.vllm_sampler.VLLMSampler.load_policy_weights`):
    the names are those of the base model's own state dict (no ``base_model.model.`` prefix, no
    ``.base_layer``, no LoRA matrices), and each merged weight is computed when it is reached, so at most one
    extra weight exists at a time. ``model`` is not modified. A model without LoRA yields its parameters as
    they are.
    """
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer

    if not isinstance(model, PeftModel):
        for name, param in model.named_parameters():
            yield name, param.detach()
        return
    base = model.get_base_model()
    layers = {name: module for name, module in base.named_modules() if isinstance(module, LoraLayer)}
    for name, module in layers.items():
        MergedLoraModel._check(name, module)
    for name, param in base.named_parameters():
        parts = name.split(".")
        if any(part.startswith("lora_") for part in parts):
            continue  # the adapter's own matrices: merged into their base weight below
        if "modules_to_save" in parts or "original_module" in parts:
            raise MergeError(f"{name}: a module trained outside LoRA (modules_to_save) cannot be merged for sampling")
        owner, _, leaf = name.partition(".base_layer.")
        if not leaf:
            yield name, param.detach()
        elif leaf == "weight" and owner in layers:
            (adapter,) = layers[owner].active_adapters
            yield f"{owner}.weight", param.detach() + layers[owner].get_delta_weight(adapter).to(param.dtype)
        else:
            yield f"{owner}.{leaf}", param.detach()


def _decode_layout(weight: torch.Tensor) -> torch.Tensor:
    """An empty tensor like a linear layer's ``weight`` ``[out, in]``, stored the way decoding multiplies it fastest.

    On a CPU, ``x @ W.T`` for the few rows of a decoding step runs 7-17% faster with ``W.T`` stored
    contiguous when ``out >= in`` (MKL, measured for 512x512 and 1376x512 at 16 rows; neutral at 508 rows,
    6% slower for ``out < in``). The values and the module's view ``[out, in]`` are the same either way.
    """
    out_features, in_features = weight.shape[0], weight.shape[-1]
    if weight.device.type == "cpu" and weight.dim() == 2 and out_features >= in_features:
        return torch.empty((in_features, out_features), dtype=weight.dtype).t()
    return torch.empty_like(weight)


def _tied(model: nn.Module) -> set[str]:
    """Parameter names that tying fills (e.g. ``lm_head.weight`` when the embeddings are tied)."""
    keys = getattr(model, "_tied_weights_keys", None) or {}
    return set(keys)  # a list of names, or a dict keyed by them
