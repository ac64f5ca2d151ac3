r"""Completion logits kept as the final hidden states and the output head, so that ``[rows, length, vocab]``
logits are never built whole.

A causal LM's logits are ``head(h)`` of its final hidden states ``h`` (``[rows, length, hidden]``, a
vocabulary's worth smaller), where ``head`` is the output layer (a linear map, with a bias in some
families) followed by what the family does to its logits:

* Gemma-2/3 soft-capping (``config.final_logit_softcapping`` = :math:`c`): :math:`c \tanh(z / c)`;
* Cohere's ``logit_scale`` (:math:`z \cdot s`) and Granite's ``logits_scaling`` (:math:`z / s`).

:func:`completion_hidden` runs the model's own forward (its wrappers, LoRA, prefix sharing and all) with
the output layer made the identity and those steps turned off for the call, so the "logits" it returns
are the hidden states at the completion positions; :class:`OutputHead` applies the head to any chunk
of them. :func:`hidden_scoring` says whether a model may be scored this way: its self-check (once per
model, :func:`opct.sampling.fast_paths.check_once`) compares ``head(hidden)`` with the plain forward's
log-probs; a head that is not a plain linear layer (e.g. a LoRA-adapted one), a sharded one, or a
family whose logits differ for another reason is scored with whole logits, said once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch

from opct.sampling.fast_paths import check_once, largest_difference, probe_prompts, tolerance
from opct.sampling.scoring import CompletionBatch, completion_logits, shares_prefix_scoring


@dataclass(frozen=True)
class OutputHead:
    """The map from final hidden states to logits: ``layer`` (the model's output linear layer), then
    ``scale`` (a factor), ``softcap`` (:math:`c \\tanh(z / c)`) and ``temperature`` (a divisor), in that order."""

    layer: torch.nn.Module
    scale: float = 1.0
    softcap: float | None = None
    temperature: float = 1.0

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits ``[..., vocab]`` of hidden states ``[..., hidden]`` (the same operations, in the same order,
        as the model's forward)."""
        z = self.layer(hidden)
        if self.scale != 1.0:
            z = z * self.scale
        if self.softcap is not None:
            z = torch.tanh(z / self.softcap) * self.softcap
        if self.temperature != 1.0:
            z = z / self.temperature
        return z

    def at_temperature(self, temperature: float) -> OutputHead:
        """This head with its logits divided by ``temperature`` (OPCT's ``teacher_temperature``)."""
        return replace(self, temperature=temperature)


def _transformers_model(model: torch.nn.Module) -> Any:
    """The transformers model inside ``model`` (through PEFT and accelerate wrappers)."""
    from transformers import PreTrainedModel

    return next((m for m in model.modules() if isinstance(m, PreTrainedModel)), model)


def output_head(model: torch.nn.Module) -> OutputHead | str:
    """``model``'s :class:`OutputHead`, or why its logits cannot be computed from hidden states here."""
    inner = _transformers_model(model)
    layer = inner.get_output_embeddings() if hasattr(inner, "get_output_embeddings") else None
    if type(layer) is not torch.nn.Linear:
        return f"its output layer is a {type(layer).__name__}, not a plain linear layer"
    if type(layer.weight) is not torch.nn.Parameter and type(layer.weight) is not torch.Tensor:
        return f"its output weight is a {type(layer.weight).__name__} (sharded)"
    config = inner.config
    scale = float(getattr(inner, "logit_scale", 1.0) or 1.0)  # Cohere: logits * logit_scale
    scaling = getattr(config, "logits_scaling", None)  # Granite: logits / logits_scaling
    if scaling not in (None, 1.0):
        scale = scale / float(scaling)
    softcap = getattr(config, "final_logit_softcapping", None)
    return OutputHead(layer=layer, scale=scale, softcap=float(softcap) if softcap else None)


@contextmanager
def _hidden_as_logits(model: torch.nn.Module) -> Iterator[None]:
    """For the duration: ``model``'s forward returns its final hidden states as ``logits`` (the output
    layer is the identity; soft-capping and logit scaling are off)."""
    inner = _transformers_model(model)
    layer, config = inner.get_output_embeddings(), inner.config
    saved = {name: getattr(config, name) for name in ("final_logit_softcapping", "logits_scaling") if hasattr(config, name)}
    scale = inner.__dict__.get("logit_scale") if "logit_scale" in inner.__dict__ else None
    layer.forward = lambda hidden: hidden  # an instance attribute shadows nn.Linear.forward
    try:
        if "final_logit_softcapping" in saved:
            config.final_logit_softcapping = None
        if "logits_scaling" in saved:
            config.logits_scaling = 1.0
        if scale is not None:
            inner.logit_scale = 1.0
        yield
    finally:
        del layer.forward
        for name, value in saved.items():
            setattr(config, name, value)
        if scale is not None:
            inner.logit_scale = scale


def completion_hidden(
    model: torch.nn.Module, batch: CompletionBatch, pad_id: int, share_prefix: bool = True
) -> torch.Tensor:
    """Final hidden states ``[N, L, hidden]`` where row ``i``, position ``t`` is what predicts
    ``completions[i][t]``: :func:`opct.sampling.scoring.completion_logits` before the output head."""
    if share_prefix and len(batch.prompts) < len(batch.completions):
        share_prefix = shares_prefix_scoring(model, pad_id)  # its self-check runs with the real head
    with _hidden_as_logits(model):
        return completion_logits(model, batch, pad_id, share_prefix)


def hidden_scoring(model: torch.nn.Module, pad_id: int) -> OutputHead | None:
    """``model``'s :class:`OutputHead` when its logits may be computed from hidden states, a chunk at a time
    (its self-check passed, once per model), else ``None`` (then its logits are built whole)."""
    head = output_head(model)
    if isinstance(head, str):
        reason = head
        check_once(model, "chunked logits from hidden states", lambda: reason, "its logits are built whole")
        return None
    ok = check_once(model, "chunked logits from hidden states", lambda: _check_hidden(model, head, pad_id),
                    "its logits are built whole")
    return head if ok else None


@torch.no_grad()
def _check_hidden(model: torch.nn.Module, head: OutputHead, pad_id: int) -> str | None:
    """``None`` when ``head(hidden)`` gives the plain forward's log-probs over the whole vocabulary on two
    random prompts and completions; else why not."""
    prompts = probe_prompts(model)
    batch = CompletionBatch(prompts, [prompts[1][:5], prompts[0][3:9]], [0, 1])
    _, mask = batch.targets_and_mask(next(model.parameters()).device)
    was_training = model.training
    model.eval()  # dropout would make two forwards differ
    try:
        whole = torch.log_softmax(completion_logits(model, batch, pad_id, share_prefix=False).float(), -1)
        chunked = torch.log_softmax(head(completion_hidden(model, batch, pad_id, share_prefix=False)).float(), -1)
    finally:
        model.train(was_training)
    if chunked.shape != whole.shape:
        return f"its hidden states give logits of shape {tuple(chunked.shape)}, not {tuple(whole.shape)}"
    diff, tol = largest_difference(chunked, whole, mask[..., None].expand_as(whole)), tolerance(model)
    return None if diff <= tol else f"its logits from hidden states differ from the forward's by {diff:.1e} > {tol:.0e}"
