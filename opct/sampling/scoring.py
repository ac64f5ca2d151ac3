"""Logits and log-probs of completion tokens under a prompt.

Sequences are ``prompt_ids + completion_ids`` concatenated as ids, never re-tokenized. Logits are
computed only at the positions that predict completion tokens. With ``share_prefix`` each distinct
prompt is encoded once and its KV cache is reused by all of its samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from opct.sampling.fast_paths import check_once, largest_difference, probe_prompts, tolerance
from opct.sampling.kv_cache import cache_kwargs, returned_cache


@dataclass
class CompletionBatch:
    """Completions to score, each tied to a prompt.

    ``prompt_of[i]`` is the index in ``prompts`` of the prompt that sequence ``i`` continues, so a
    prompt with ``n`` samples is stored once.
    """

    prompts: list[list[int]]
    completions: list[list[int]]
    prompt_of: list[int]

    @property
    def width(self) -> int:
        return max(len(c) for c in self.completions)

    def targets_and_mask(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """Completion ids right-padded to ``[N, L]`` and the mask of real tokens."""
        width = self.width
        targets = torch.zeros((len(self.completions), width), dtype=torch.long)
        mask = torch.zeros((len(self.completions), width), dtype=torch.bool)
        for i, c in enumerate(self.completions):
            targets[i, : len(c)] = torch.tensor(c, dtype=torch.long)
            mask[i, : len(c)] = True
        return targets.to(device), mask.to(device)

    def num_tokens(self) -> int:
        return sum(len(c) for c in self.completions)


def _left_pad(seqs: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s) :] = 1
    return ids, mask


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def completion_logits(
    model: torch.nn.Module,
    batch: CompletionBatch,
    pad_id: int,
    share_prefix: bool = True,
) -> torch.Tensor:
    """Logits ``[N, L, V]`` where row ``i``, position ``t`` predicts ``completions[i][t]``.

    Positions past a completion's end hold padding logits; use the mask from
    :meth:`CompletionBatch.targets_and_mask`.
    """
    if share_prefix and len(batch.prompts) < len(batch.completions) and shares_prefix_scoring(model, pad_id):
        return _logits_shared_prefix(model, batch, pad_id)
    return _logits_full(model, batch, pad_id)


def shares_prefix_scoring(model: torch.nn.Module, pad_id: int) -> bool:
    """Whether ``model`` may score a prompt's completions on one encoding of the prompt (its KV cache reused):
    its self-check (:func:`_check_shared_prefix`, once per model, :mod:`opct.sampling.fast_paths`) passed."""
    return check_once(model, "shared-prefix scoring", lambda: _check_shared_prefix(model, pad_id),
                      "each sequence is scored whole")


@torch.no_grad()
def _check_shared_prefix(model: torch.nn.Module, pad_id: int) -> str | None:
    """``None`` when shared-prefix scoring gives the whole-sequence forward's log-probs on two random prompts
    with two completions each (of unequal lengths); else why not."""
    prompts = probe_prompts(model)
    completions = [prompts[1][:5], prompts[0][3:6], prompts[0][:4], prompts[1][6:8]]
    batch = CompletionBatch(prompts, completions, [0, 0, 1, 1])
    targets, mask = batch.targets_and_mask(_device_of(model))
    shared = token_logprobs(_logits_shared_prefix(model, batch, pad_id), targets)
    whole = token_logprobs(_logits_full(model, batch, pad_id), targets)
    diff, tol = largest_difference(shared, whole, mask), tolerance(model)
    return None if diff <= tol else f"its log-probs differ from the whole sequence's by {diff:.1e} > {tol:.0e}"


def _logits_full(model: torch.nn.Module, batch: CompletionBatch, pad_id: int) -> torch.Tensor:
    device = _device_of(model)
    width = batch.width
    prompt_ids, prompt_mask = _left_pad([batch.prompts[j] for j in batch.prompt_of], pad_id)
    targets, comp_mask = batch.targets_and_mask()
    targets = torch.where(comp_mask, targets, torch.full_like(targets, pad_id))
    input_ids = torch.cat([prompt_ids, targets], dim=1).to(device)
    attention = torch.cat([prompt_mask, comp_mask.long()], dim=1).to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, logits_to_keep=width + 1, use_cache=False)
    return out.logits[:, :width]


def _logits_shared_prefix(model: torch.nn.Module, batch: CompletionBatch, pad_id: int) -> torch.Tensor:
    device = _device_of(model)
    width = batch.width
    prompt_ids, prompt_mask = _left_pad(batch.prompts, pad_id)
    prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
    positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
    prefix = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions, logits_to_keep=1, use_cache=True)
    select = torch.tensor(batch.prompt_of, device=device)
    first = prefix.logits[select]  # [N, 1, V]: predicts each completion's first token
    if width == 1:
        return first
    cache = returned_cache(prefix)
    cache.batch_select_indices(select)
    targets, comp_mask = batch.targets_and_mask(device)
    step_ids = torch.where(comp_mask, targets, torch.full_like(targets, pad_id))[:, : width - 1]
    step_mask = comp_mask[:, : width - 1].long()
    attention = torch.cat([prompt_mask[select], step_mask], dim=1)
    prompt_lens = prompt_mask.sum(-1)[select]
    step_positions = prompt_lens[:, None] + torch.arange(width - 1, device=device)[None, :]
    rest = model(
        input_ids=step_ids,
        attention_mask=attention,
        position_ids=step_positions,
        **cache_kwargs(model, cache),
        use_cache=True,
    )
    return torch.cat([first, rest.logits], dim=1)


class _TokenLogProb(torch.autograd.Function):
    r"""``log softmax(x)[t]`` of each row of ``x`` ``[R, V]``, ``chunk`` rows at a time.

    Forward: :math:`\log p_t = \mathrm{log\_softmax}(x)_t`. Backward, for an upstream gradient
    :math:`g` per row: :math:`\partial / \partial x_v = g\,(\mathbb 1[v = t] - \mathrm{softmax}(x)_v)`,
    recomputed from the saved logits (which the graph holds anyway). Only a ``[chunk, V]`` float32
    temporary exists at a time, in either pass; nothing ``[R, V]`` is copied or saved beyond the
    gradient itself.
    """

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, targets: torch.Tensor, chunk: int) -> torch.Tensor:
        compute = torch.float64 if logits.dtype == torch.float64 else torch.float32
        out = torch.empty(logits.shape[0], dtype=compute, device=logits.device)  # [R]
        for start in range(0, logits.shape[0], chunk):
            x = logits[start : start + chunk].to(compute)  # [chunk, V]
            t = targets[start : start + chunk, None]  # [chunk, 1]
            out[start : start + chunk] = torch.log_softmax(x, dim=-1).gather(1, t)[:, 0]
        ctx.save_for_backward(logits, targets)
        ctx.chunk = chunk
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        logits, targets = ctx.saved_tensors
        grad = torch.empty_like(logits)  # [R, V]
        for start in range(0, logits.shape[0], ctx.chunk):
            g = grad_out[start : start + ctx.chunk, None]  # [chunk, 1]
            p = torch.softmax(logits[start : start + ctx.chunk].to(grad_out.dtype), dim=-1)
            p.mul_(-g).scatter_add_(1, targets[start : start + ctx.chunk, None], g)
            grad[start : start + ctx.chunk] = p
        return grad, None, None


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, chunk_size: int = 512) -> torch.Tensor:
    """``log softmax(logits)[target]`` for every position, in float32 (float64 for float64 logits): ``[N, L]``.

    ``chunk_size`` positions are taken at a time, so memory beyond the logits stays ``[chunk_size, V]``.
    """
    n, length, vocab = logits.shape
    flat = logits.reshape(n * length, vocab)
    return _TokenLogProb.apply(flat, targets.reshape(n * length).to(flat.device), chunk_size).reshape(n, length)


@torch.no_grad()
def token_entropy_sum(logits: torch.Tensor, mask: torch.Tensor, chunk_size: int = 512) -> float:
    """Sum over masked positions of the entropy ``-sum_v p(v) log p(v)`` of ``softmax(logits)``
    (``[N, L, V]`` logits, ``[N, L]`` mask), ``chunk_size`` positions at a time, in float32."""
    flat = logits.reshape(-1, logits.shape[-1])
    weights = mask.reshape(-1).to(flat.device)
    total = 0.0
    for start in range(0, flat.shape[0], chunk_size):
        z = flat[start : start + chunk_size].float()
        logp = torch.log_softmax(z, dim=-1)
        entropy = -(logp.exp() * logp).sum(-1)
        total += float((entropy * weights[start : start + chunk_size].float()).sum())
    return total


def reverse_kl_sum(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor, chunk_size: int = 512
) -> float:
    """Sum over masked positions of ``KL(softmax(student) || softmax(teacher))`` over the whole vocabulary,
    ``chunk_size`` positions at a time, in float32, without gradients."""
    with torch.no_grad():
        s = student_logits.reshape(-1, student_logits.shape[-1])
        t = teacher_logits.reshape(-1, teacher_logits.shape[-1]).to(s.device)
        weights = mask.reshape(-1).to(s.device)
        total = 0.0
        for start in range(0, s.shape[0], chunk_size):
            ls = torch.log_softmax(s[start : start + chunk_size].float(), dim=-1)
            lt = torch.log_softmax(t[start : start + chunk_size].float(), dim=-1)
            kl = (ls.exp() * (ls - lt)).sum(-1)
            total += float((kl * weights[start : start + chunk_size].float()).sum())
        return total


def completion_logprobs(
    model: torch.nn.Module,
    batch: CompletionBatch,
    pad_id: int,
    share_prefix: bool = True,
    chunk_size: int = 512,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs ``[N, L]`` of each completion's tokens under its prompt, and the token mask."""
    logits = completion_logits(model, batch, pad_id, share_prefix)
    targets, mask = batch.targets_and_mask(logits.device)
    return token_logprobs(logits, targets, chunk_size) * mask, mask
