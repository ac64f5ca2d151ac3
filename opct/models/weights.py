"""A policy's weights: a fresh LoRA adapter on them, and their identity (sha256, fingerprint)."""

from __future__ import annotations

import hashlib

import torch
from transformers import PreTrainedModel

from opct.config import LoraConfig


def add_lora(model: PreTrainedModel, lora: LoraConfig) -> PreTrainedModel:
    """Wrap ``model`` with a fresh LoRA adapter (PEFT); only the adapter is trainable."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    peft_cfg = PeftLoraConfig(**lora.peft_kwargs(), task_type="CAUSAL_LM")
    return get_peft_model(model, peft_cfg)


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

