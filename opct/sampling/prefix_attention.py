"""Decode attention that reads each prompt's cached keys and values once for all its samples.

When ``n`` samples of a prompt decode together, their caches hold the same prompt keys and values;
copied per sample, every decoding step reads them ``n`` times, and on a CPU (or any memory-bound
decode) that reading is the attention's cost. Here the cache keeps the prompt part once per prompt
(:class:`SharedPrefixLayer`: ``prefix_k``/``prefix_v`` ``[prompts, kv_heads, prompt_len, head_dim]``) and
only the generated part per sample; :func:`shared_prefix_attention` scores each sample's query against
both and normalises them together (one softmax over prompt and generated positions)::

    s_p = q K_p^T * scale   (masked where the prompt was padded)    s_g = q K_g^T * scale
    out = (exp(s_p - m) V_p + exp(s_g - m) V_g) / (sum exp(s_p - m) + sum exp(s_g - m)),  m = max(s_p, s_g)

which is softmax attention over the concatenated keys, the same function as the per-sample cache up
to float rounding. It is used by :class:`opct.sampling.hf_sampler.HFSampler` only on CPU, only while decoding one token
at a time, for batches whose rows are each prompt's samples side by side, in equal numbers, and for SDPA
models with plain full attention (no sliding window, logit soft-capping or attention sinks, see
:func:`supports_shared_prefix`), and only once a self-check on the model showed that every attention
module calls it (:func:`recording_dispatch`) and that its log-probs are the plain forward's
(:mod:`opct.sampling.fast_paths`); everything else runs the model's own attention.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "opct_shared_prefix"

#: The cache being decoded with shared prefixes (set by :func:`shared_prefix_decoding`).
_ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("opct_shared_prefix_cache", default=None)
#: While :func:`recording_dispatch` runs: the ids of the modules whose attention went through this function.
_CALLED: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar("opct_shared_prefix_called", default=None)


class SharedPrefixLayer(DynamicLayer):
    """One full-attention layer's cache: the prompt once per prompt, the generated tokens per row.

    ``update`` appends the generated keys and values into a buffer sized for the whole generation and
    returns only them; the attention reads the prefix from this layer. ``get_seq_length`` counts both.
    """

    def __init__(self, prefix_k: torch.Tensor, prefix_v: torch.Tensor, prefix_mask: torch.Tensor, group: int, capacity: int):
        super().__init__()
        self.prefix_k, self.prefix_v = prefix_k.contiguous(), prefix_v.contiguous()  # [prompts, kv_heads, prompt_len, dim]
        self.prefix_mask = prefix_mask.bool()  # [prompts, prompt_len]: False where the prompt was padded
        self.group, self.capacity, self.length = group, capacity, 0
        rows = prefix_k.shape[0] * group
        shape = (rows, prefix_k.shape[1], capacity, prefix_k.shape[-1])
        self.buf_k, self.buf_v = prefix_k.new_empty(shape), prefix_v.new_empty(shape)
        self.is_initialized = True
        self.keys, self.values = self.buf_k[..., :0, :], self.buf_v[..., :0, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
               ) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + key_states.shape[-2]
        if end > self.capacity:
            raise RuntimeError(f"shared-prefix cache holds {self.capacity} generated positions, asked for {end}")
        self.buf_k[..., self.length : end, :] = key_states
        self.buf_v[..., self.length : end, :] = value_states
        self.length = end
        self.keys, self.values = self.buf_k[..., :end, :], self.buf_v[..., :end, :]
        return self.keys, self.values

    def get_seq_length(self, *args: object, **kwargs: object) -> int:
        return self.prefix_k.shape[-2] + self.length


def shared_prefix_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention of one decoding step against a :class:`SharedPrefixLayer`; the model's SDPA otherwise.

    ``query``: ``[rows, heads, 1, head_dim]``; ``key``/``value``: the rows' generated part
    ``[rows, kv_heads, generated, head_dim]``. Returns ``[rows, 1, heads, head_dim]`` as SDPA does.
    """
    cache = _ACTIVE.get()
    layer = cache.layers[module.layer_idx] if cache is not None and hasattr(module, "layer_idx") else None
    if not isinstance(layer, SharedPrefixLayer) or query.shape[2] != 1 or scaling is None:
        if cache is not None:  # transformers builds no mask for this implementation: SDPA here would ignore padding
            raise RuntimeError("shared-prefix attention reached outside one-token decoding of a SharedPrefixLayer")
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    unsupported = [k for k in ("sliding_window", "softcap", "s_aux") if kwargs.get(k) is not None]
    if unsupported:
        raise RuntimeError(f"shared-prefix attention does not implement {unsupported}")
    called = _CALLED.get()
    if called is not None:
        called.add(id(module))
    rows, heads, _, dim = query.shape
    prompts, kv_heads, prefix_len, _ = layer.prefix_k.shape
    group, rep = layer.group, heads // kv_heads
    q = query.float()
    # the prompt part, each prompt's keys read once for its `group` rows: [prompts, kv_heads, group*rep, prefix_len]
    q_grouped = q.view(prompts, group, kv_heads, rep, dim).transpose(1, 2).reshape(prompts, kv_heads, group * rep, dim)
    s_p = torch.matmul(q_grouped, layer.prefix_k.float().transpose(-1, -2)) * scaling
    s_p = s_p.masked_fill(~layer.prefix_mask[:, None, None, :], float("-inf"))
    s_p = s_p.view(prompts, kv_heads, group, rep, prefix_len).transpose(1, 2).reshape(rows, kv_heads, rep, prefix_len)
    # the generated part, per row: [rows, kv_heads, rep, generated]
    s_g = torch.matmul(q.view(rows, kv_heads, rep, dim), key.float().transpose(-1, -2)) * scaling
    m = torch.maximum(s_p.amax(-1, keepdim=True), s_g.amax(-1, keepdim=True))
    e_p, e_g = torch.exp(s_p - m), torch.exp(s_g - m)
    denom = e_p.sum(-1, keepdim=True) + e_g.sum(-1, keepdim=True)
    e_p = e_p.view(prompts, group, kv_heads, rep, prefix_len).transpose(1, 2).reshape(prompts, kv_heads, group * rep, prefix_len)
    o_p = torch.matmul(e_p, layer.prefix_v.float())  # [prompts, kv_heads, group*rep, dim]
    o_p = o_p.view(prompts, kv_heads, group, rep, dim).transpose(1, 2).reshape(rows, kv_heads, rep, dim)
    out = (o_p + torch.matmul(e_g, value.float())) / denom  # [rows, kv_heads, rep, dim]
    return out.to(query.dtype).reshape(rows, heads, 1, dim).transpose(1, 2), None


AttentionInterface.register(NAME, shared_prefix_attention)


def attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Every module of ``model`` that holds a KV-cache layer (a ``layer_idx``) and a config naming an attention
    implementation: the modules :func:`shared_prefix_decoding` switches, each of which must then call
    :func:`shared_prefix_attention` (:func:`recording_dispatch` tells whether it did)."""
    return [m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(getattr(m, "config", None), "_attn_implementation")]


def _attention_configs(model: torch.nn.Module) -> list[Any]:
    """The config object of every attention module (:func:`attention_modules`), each once."""
    return list({id(m.config): m.config for m in attention_modules(model)}.values())


@contextmanager
def recording_dispatch() -> Iterator[set[int]]:
    """Record, for the duration, the ``id`` of every module whose decode attention :func:`shared_prefix_attention` computed."""
    called: set[int] = set()
    token = _CALLED.set(called)
    try:
        yield called
    finally:
        _CALLED.reset(token)


def supports_shared_prefix(model: torch.nn.Module) -> bool:
    """Whether ``model``'s configs allow :func:`shared_prefix_attention`: every attention module's config says
    SDPA, with plain full attention. Necessary, not sufficient: a module may read its config by hand and
    never reach the attention interface (Falcon); :meth:`opct.sampling.hf_sampler.HFSampler.uses_prefix_attention`
    checks that on the modules themselves before decoding with it."""
    configs = _attention_configs(model)

    def plain(c: Any) -> bool:  # no sliding window, logit soft-capping or attention sinks to reproduce
        window = getattr(c, "sliding_window", None) and getattr(c, "use_sliding_window", True)
        return not window and not getattr(c, "attn_logit_softcapping", None) and "sliding_attention" not in (
            getattr(c, "layer_types", None) or ()) and getattr(c, "model_type", "") != "gpt_oss"

    return bool(configs) and all(c._attn_implementation == "sdpa" and plain(c) for c in configs)


def grouped_rows(prompt_of_row: list[int]) -> int | None:
    """``g`` when the rows are each prompt's ``g`` samples side by side (``[a, a, b, b, ...]``, ``g >= 2``)."""
    group = next((i for i, p in enumerate(prompt_of_row) if p != prompt_of_row[0]), len(prompt_of_row))
    if group < 2 or len(prompt_of_row) % group:
        return None
    blocks = [prompt_of_row[i : i + group] for i in range(0, len(prompt_of_row), group)]
    firsts = [b[0] for b in blocks]
    if any(len(set(b)) != 1 for b in blocks) or len(set(firsts)) != len(firsts):
        return None
    return group


@contextmanager
def shared_prefix_decoding(model: torch.nn.Module, cache: Any) -> Iterator[None]:
    """Decode ``model`` against ``cache``'s shared prefixes: its attention modules use
    :func:`shared_prefix_attention` for the duration (check :func:`supports_shared_prefix` first)."""
    configs = _attention_configs(model)
    before = [c._attn_implementation for c in configs]
    token = _ACTIVE.set(cache)
    for c in configs:
        c._attn_implementation = NAME
    try:
        yield
    finally:
        for c, implementation in zip(configs, before, strict=True):
            c._attn_implementation = implementation
        _ACTIVE.reset(token)
