"""Gradient checkpointing of the policy (``train.gradient_checkpointing``).

With it on, each decoder layer of the policy keeps only its input in the forward pass and runs again
in the backward pass to rebuild what the gradient needs (transformers' own activation checkpointing,
non-reentrant: ``torch.utils.checkpoint`` with ``use_reentrant=False``). The activations held for the
backward drop from every layer's intermediates to one ``[rows, length, hidden]`` tensor per layer, for
one more forward of the layers per step. The loss and gradients are the same as without (tested to
1e-6 relative on three families, OPCT and BCT, LoRA and full fine-tuning:
``tests/test_memory_options.py``).

Where it applies, and where not:

* only forwards that build a graph are checkpointed (transformers checkpoints a layer only in
  training mode with gradients enabled): sampling (eval mode, no gradients, with its KV cache), the
  frozen teacher's scoring and validation run as before. The full fine-tuning teacher is a copy made
  before checkpointing is turned on, so it is never checkpointed at all;
* the student's scoring forward is one forward of each whole sequence: shared-prefix scoring reuses a
  prompt's KV cache, which a checkpointed layer does not fill (``opct.methods.base.score_pair``);
* LoRA: the checkpointing is turned on in the base model under the adapter; non-reentrant
  checkpointing needs no input that requires a gradient (transformers adds the hook anyway);
* FSDP2: transformers checkpoints each layer's ``forward``, inside the hooks FSDP puts on the layer's
  call, so the sharded layers gather their weights once for the forward and once for the recompute.
  accelerate's own ``fsdp_activation_checkpointing`` is refused (:func:`check_accelerate_checkpointing`).
"""

from __future__ import annotations

import torch
from accelerate import Accelerator

from opct.errors import DistributionError, OpctError
from opct.models import is_peft

#: What ``torch.utils.checkpoint`` is called with: the non-reentrant implementation (torch's
#: recommendation; it works with keyword inputs, inputs that need no gradient and FSDP2's hooks).
CHECKPOINT_KWARGS = {"use_reentrant": False}


class GradientCheckpointingError(OpctError, ValueError):
    """``train.gradient_checkpointing: true`` for a model whose layers transformers cannot checkpoint."""


def enable_gradient_checkpointing(model: torch.nn.Module) -> int:
    """Turn on non-reentrant gradient checkpointing in ``model`` (a PEFT model: in its base model);
    returns how many decoder layers are now checkpointed."""
    base = model.get_base_model() if is_peft(model) else model
    if not getattr(base, "supports_gradient_checkpointing", False):
        raise GradientCheckpointingError(
            f"train.gradient_checkpointing: {type(base).__name__} does not support gradient checkpointing in "
            "transformers; set train.gradient_checkpointing: false"
        )
    if hasattr(base, "activation_checkpointing_enable"):  # its name since transformers 5.x; the old one warns
        base.activation_checkpointing_enable(activation_checkpointing_kwargs=dict(CHECKPOINT_KWARGS))
    else:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(CHECKPOINT_KWARGS))
    return checkpointed_layers(model)


def checkpointed_layers(model: torch.nn.Module) -> int:
    """How many of ``model``'s decoder layers are checkpointed (transformers' ``GradientCheckpointingLayer``)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    return sum(1 for m in model.modules() if isinstance(m, GradientCheckpointingLayer) and m.gradient_checkpointing)


def check_accelerate_checkpointing(acc: Accelerator) -> None:
    """Refuse accelerate's FSDP ``activation_checkpointing``: it wraps every decoder layer in torch's
    ``checkpoint_wrapper``, which renames the layer's parameters (``._checkpoint_wrapped_module.``) in the
    names opct's checkpoints and ``final/`` are written under; ``train.gradient_checkpointing`` does the
    same work without renaming anything."""
    plugin = getattr(acc.state, "fsdp_plugin", None)
    if plugin is not None and getattr(plugin, "activation_checkpointing", False):
        raise DistributionError(
            "fsdp_activation_checkpointing is not supported: it wraps each layer in torch's checkpoint_wrapper, "
            "which renames the parameters opct's checkpoints are written under; set fsdp_activation_checkpointing: "
            "false in the accelerate config and train.gradient_checkpointing: true in the run's config instead"
        )
