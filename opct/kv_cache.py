"""A KV cache that appends in place: one buffer per layer, sized for the whole generation."""

from __future__ import annotations

import torch
from transformers import DynamicCache, PretrainedConfig
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
