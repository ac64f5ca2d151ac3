"""Grouped-query attention for masked decode steps, without copying the cache.

transformers' SDPA attention passes grouped-query attention to ``scaled_dot_product_attention`` natively
(``enable_gqa``) only when there is no mask. The static decoder always passes one (its prepared
``[rows, 1, 1, capacity]`` mask), so on transformers 5.17 (the GPU image's) every step ``repeat_kv``-copies
each layer's whole static cache from ``kv_heads`` to ``heads`` heads before attending: two cache-sized
copies per layer per token, 56 clones a step at Qwen3-0.6B's 28 layers (``benchmarks/decode_step_ops.py``).
Later versions fold a one-token query themselves (``pack_gqa``, in 5.25); there
:data:`NATIVE_GROUPED_QUERY` is true and nothing is switched.

:func:`grouped_query_attention` instead folds each key/value head's ``rep = heads // kv_heads`` query heads
into its query rows, which needs no copy of the keys or values::

    q [rows, heads, q_len, d]  ->  q' [rows, kv_heads, rep * q_len, d]      (head h = g * rep + r -> group g)
    out' = softmax(q' K^T * scale + mask) V                                 K, V: [rows, kv_heads, L, d]
    out  = out' -> [rows, heads, q_len, d]

which is the same function as attending with repeated keys (the rows of a group see the same keys, and a
mask row is shared by every head). It is registered with transformers' attention interface as
:data:`NAME`, used by the static decoder (:func:`grouped_query_decoding`) for SDPA models with plain full
attention; everything it does not cover (no grouping, no mask, dropout, sliding windows, soft-capping,
attention sinks) goes to transformers' own SDPA function.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations import sdpa_attention
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "opct_grouped_query"

#: Whether the installed transformers' SDPA already attends a one-token query on the key/value heads under a mask
#: (``pack_gqa``, 5.25 and later): then :func:`grouped_query_configs` switches nothing.
NATIVE_GROUPED_QUERY = hasattr(sdpa_attention, "pack_gqa")
#: Keyword arguments whose attention this function does not reproduce (then transformers' SDPA runs).
UNSUPPORTED = ("sliding_window", "softcap", "s_aux")


def grouped_query_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """SDPA over ``key``/``value`` ``[rows, kv_heads, L, d]`` for ``query`` ``[rows, heads, q_len, d]`` with each
    key/value head's query heads folded into its rows (module docstring). Returns ``[rows, q_len, heads, d]``, as
    transformers' attention functions do."""
    rows, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    if (heads == kv_heads or heads % kv_heads or attention_mask is None or dropout
            or any(kwargs.get(k) is not None for k in UNSUPPORTED)):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    rep = heads // kv_heads
    length = key.shape[-2]
    mask = attention_mask[:, :, :, :length]
    if q_len > 1:  # each head's copy of a query row needs that row's mask row
        mask = mask[:, :, None].expand(rows, mask.shape[1], rep, q_len, length).reshape(rows, mask.shape[1], rep * q_len, length)
    folded = query.reshape(rows, kv_heads, rep * q_len, dim)
    out = F.scaled_dot_product_attention(folded, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(rows, heads, q_len, dim).transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, grouped_query_attention)


def _attention_configs(model: torch.nn.Module) -> list[Any]:
    """The config object of every module of ``model`` that names an attention implementation, each once."""
    configs = {id(m.config): m.config for m in model.modules()
               if hasattr(getattr(m, "config", None), "_attn_implementation")}
    return list(configs.values())


def grouped_query_configs(model: torch.nn.Module, native: bool = NATIVE_GROUPED_QUERY) -> list[Any]:
    """The attention configs of ``model`` when it is an SDPA model with grouped-query attention (fewer key/value
    heads than heads) in every one and transformers does not fold the queries itself (``native``): the configs
    :func:`grouped_query_decoding` switches; else ``[]``."""
    if native:
        return []
    configs = _attention_configs(model)

    def grouped(c: Any) -> bool:
        heads, kv = getattr(c, "num_attention_heads", None), getattr(c, "num_key_value_heads", None)
        return bool(heads and kv and kv < heads and heads % kv == 0)

    return configs if configs and all(c._attn_implementation == "sdpa" and grouped(c) for c in configs) else []


@contextmanager
def grouped_query_decoding(configs: list[Any]) -> Iterator[bool]:
    """For the duration, the attention of the models behind ``configs`` (:func:`grouped_query_configs`) runs
    :func:`grouped_query_attention`; with no configs nothing changes. Yields whether it switched."""
    for c in configs:
        c._attn_implementation = NAME
    try:
        yield bool(configs)
    finally:
        for c in configs:
            c._attn_implementation = "sdpa"
