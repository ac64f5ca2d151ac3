"""A KV cache that appends in place: one buffer per layer, sized for the whole generation; and the
name a model's forward takes its cache under.

transformers 5.24 renamed the forward's ``past_key_values`` to ``cache`` (the old name still works
until 5.40, with a ``FutureWarning`` at every call); :func:`cache_kwargs` passes the cache under the
name the installed model class declares, and :func:`returned_cache` reads it back under either.
"""

from __future__ import annotations

import inspect
from functools import cache as memoize
from typing import Any

import torch
from transformers import DynamicCache, PretrainedConfig, PreTrainedModel
from transformers.cache_utils import DynamicLayer


def buffered_cache(config: PretrainedConfig, capacity: int) -> DynamicCache:
    """An empty KV cache whose full-attention layers append in place (see :class:`BufferedLayer`)."""
    cache = DynamicCache(config=config)
    cache.layers = [BufferedLayer(capacity) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


class BufferedLayer(DynamicLayer):
    """A ``DynamicLayer`` that appends into a buffer sized for the whole generation.

    Hugging Face's layer concatenates the new keys and values to the old ones at every decoding
    step, copying the whole cache each time. Here ``keys``/``values`` are views of the first
    positions of a preallocated buffer, so the inherited methods (sequence length, crop, batch
    selection) work unchanged; a tensor they replace is copied into a fresh buffer at the next append.
    """

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity = capacity
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.get_seq_length()
        end = start + key_states.shape[-2]
        if not self._backed_by_buffer(key_states, end):
            size = max(self.capacity, end)
            self._buffers = (_grown(self.keys, key_states, start, size), _grown(self.values, value_states, start, size))
        keys, values = self._buffers
        keys[..., start:end, :] = key_states
        values[..., start:end, :] = value_states
        self.keys, self.values = keys[..., :end, :], values[..., :end, :]
        return self.keys, self.values

    def _backed_by_buffer(self, new: torch.Tensor, end: int) -> bool:
        if self._buffers is None:
            return False
        buf = self._buffers[0]
        same_rows = buf.shape[:2] == new.shape[:2] and buf.shape[-1] == new.shape[-1] and buf.dtype == new.dtype
        held = self.keys.numel() == 0 or self.keys.data_ptr() == buf.data_ptr()
        return same_rows and held and end <= buf.shape[-2]


def _grown(old: torch.Tensor, new: torch.Tensor, length: int, size: int) -> torch.Tensor:
    """A buffer for ``size`` positions of ``new``'s rows holding the first ``length`` positions of ``old``."""
    buf = new.new_empty((*new.shape[:-2], size, new.shape[-1]))
    if length:
        buf[..., :length, :] = old
    return buf


@memoize
def _cache_keyword(model_class: type) -> str:
    try:
        params = inspect.signature(model_class.forward).parameters  # follows the deprecation wrapper
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def cache_kwargs(model: torch.nn.Module, kv_cache: Any) -> dict[str, Any]:
    """``{"cache": kv_cache}`` or ``{"past_key_values": kv_cache}``: the keyword the forward of
    ``model``'s (outermost) transformers model declares; a PEFT or opct wrapper passes it through."""
    inner = next((m for m in model.modules() if isinstance(m, PreTrainedModel)), model)
    return {_cache_keyword(type(inner)): kv_cache}


def returned_cache(output: Any) -> Any:
    """The KV cache a forward returned (``output.cache`` from transformers 5.24 on, ``past_key_values`` before)."""
    return output["cache"] if "cache" in output else output["past_key_values"]
