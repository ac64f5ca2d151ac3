"""A policy's weights: a fresh LoRA adapter on them, and their identity (sha256, fingerprint)."""

from __future__ import annotations

import difflib
import hashlib

import torch
from transformers import PreTrainedModel

from opct.config import ConfigError, LoraConfig


def add_lora(model: PreTrainedModel, lora: LoraConfig) -> PreTrainedModel:
    """Wrap ``model`` with a fresh LoRA adapter (PEFT); only the adapter is trainable. Every module name the
    settings give must match a module of ``model`` (:func:`check_adapter_names`)."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    check_adapter_names(model, lora)
    peft_cfg = PeftLoraConfig(**lora.peft_kwargs(), task_type="CAUSAL_LM")
    return get_peft_model(model, peft_cfg)


def check_adapter_names(model: torch.nn.Module, lora: LoraConfig) -> None:
    """Refuse a ``lora.target_modules`` or ``lora.modules_to_save`` name that matches no module of ``model``, as
    PEFT matches them (a target: the module's name or its last dotted parts; a module to save: any end of its
    name), naming the unknown names and some of the model's own (PEFT ignores an unknown ``modules_to_save``
    name, and adapts what the others match)."""
    names = [name for name, _ in model.named_modules(remove_duplicate=False) if name]
    targets = [] if lora.target_modules == "all-linear" else lora.target_modules
    for key, wanted, matches in (
        ("lora.target_modules", targets, lambda name, t: name == t or name.endswith(f".{t}")),
        ("lora.modules_to_save", lora.modules_to_save, lambda name, t: name.endswith(t)),
    ):
        unknown = [t for t in wanted if not any(matches(name, t) for name in names)]
        if not unknown:
            continue
        own = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules() if name and not any(module.children())})
        near = [m for t in unknown for m in difflib.get_close_matches(t, own, n=2, cutoff=0.6)]
        shown = list(dict.fromkeys([*near, *own]))[:8]
        raise ConfigError(
            f"{key}: {', '.join(unknown)} {'matches' if len(unknown) == 1 else 'match'} no module of "
            f"{type(model).__name__}, so {'it' if len(unknown) == 1 else 'they'} would train nothing; its modules "
            f"include {', '.join(shown)}" + (" (lora.target_modules: all-linear adapts every linear layer)"
                                              if key == "lora.target_modules" else "")
        )


def is_peft(model: torch.nn.Module) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def weights_fingerprint(model: torch.nn.Module) -> str:
    """The first 16 hex digits of :func:`weights_sha256`: the identity runs, evals and attacks compare."""
    return weights_sha256(model)[:16]


def same_weights(recorded: str, sha256: str) -> bool:
    """Whether a recorded base-weights hash names the weights of full ``sha256``: the full hash, or the
    16-digit prefix that checkpoints written before opct recorded the full one hold."""
    return recorded == sha256 or (len(recorded) == 16 and sha256.startswith(recorded))


def weights_sha256(model: torch.nn.Module) -> str:
    """sha256 over every weight of ``model`` (names, shapes, dtypes and all bytes), tensor by tensor.

    Under LoRA it hashes the base weights only (the teacher), not the adapter. Each tensor is
    hashed in place (one device-to-host copy at a time on an accelerator), so no second copy of the
    model is ever held.
    """
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        if "lora_" in name:
            continue
        h.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        data = tensor.detach().contiguous()
        h.update(data.cpu().view(torch.uint8).numpy().data if data.numel() else b"")
    return h.hexdigest()

