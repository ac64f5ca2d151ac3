"""The static decoder: a fixed-shape decode step that a GPU can replay as one CUDA graph.

The plain decoder (:meth:`opct.sampling.hf_sampler.HFSampler._decode`) grows the attention mask by a
``torch.cat`` and the KV cache by one position at every token, and asks the device whether every row has
ended after each one (a host sync). Each of those keeps a GPU waiting on Python. Here, once the prompts
are encoded (by the same code as the plain decoder, so the first token's logits are the same):

* the KV cache is a transformers ``StaticCache`` of :func:`static_capacity` positions (prompt plus new
  tokens, rounded up to :data:`CAPACITY_BUCKET`), written in place at a position counter on the device;
* the attention mask is a preallocated ``[rows, 1, 1, capacity]`` mask (prompt padding and the positions
  decoded so far), passed to the model as a prepared 4-D mask, and the position ids a ``[rows, 1]``
  buffer advanced in place: every decode step has the same shapes and addresses;
* end of sequence is tracked on the device and read back only every :data:`EOS_CHECK_EVERY` steps; the
  rows that ended keep decoding padding until then, which changes no completion (each ends at its first
  end-of-sequence token);
* on CUDA the step's forward is captured once per shape as a CUDA graph
  (:mod:`opct.sampling.cuda_graphs`) and replayed; the buffers of a shape are kept for the rest of the
  sampler's call, so its later batches of the same shape reuse the graph, and freed when the call ends
  (:meth:`opct.sampling.hf_sampler.HFSampler.release_static`), so that no static cache outlives the rollouts.

Token choice is the plain decoder's own ``_TokenChooser`` (the same uniforms, temperature, top-p,
minimum length and recorded log-probs). The static decoder is used only for models whose layers are all
full attention with the ``sdpa`` or ``eager`` implementation (:func:`why_not_static`; sliding windows
would need their own masks), and only after its self-check on the model (:mod:`opct.sampling.fast_paths`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache, PreTrainedModel, StaticCache
from transformers.cache_utils import StaticLayer

from opct.sampling.cuda_graphs import GraphCapture, capture_step, uncached_autocast
from opct.sampling.grouped_query_attention import grouped_query_configs, grouped_query_decoding
from opct.sampling.kv_cache import cache_kwargs

#: Rows' end of sequence is read back from the device every this many tokens: one host sync per 8 steps
#: instead of one per step, at most 7 steps of padding decoded after the last row ended.
EOS_CHECK_EVERY = 8

#: The static cache holds a multiple of this many positions, so that batches whose prompt and completion
#: lengths differ by less share one shape (and one captured graph).
CAPACITY_BUCKET = 64

#: Shapes whose buffers (a static KV cache each, as large as the plain decoder's for that batch) and graph
#: are kept for reuse within a sampler's call; the least recently used beyond this many are dropped. A
#: training run's sampling call is one batch of one shape (``sequences_per_call`` rows).
KEPT_SHAPES = 2

#: The attention implementations whose 4-D mask the static decoder builds: ``sdpa`` takes a boolean mask
#: (True: attend), ``eager`` adds a float mask to its scores.
MASKED_IMPLEMENTATIONS = ("sdpa", "eager")


def static_capacity(prompt_width: int, max_new_tokens: int) -> int:
    """The static cache's positions for a batch: ``prompt_width + max_new_tokens`` rounded up to :data:`CAPACITY_BUCKET`."""
    need = prompt_width + max_new_tokens
    return -(-need // CAPACITY_BUCKET) * CAPACITY_BUCKET


def _inner_model(model: torch.nn.Module) -> torch.nn.Module:
    return next((m for m in model.modules() if isinstance(m, PreTrainedModel)), model)


def why_not_static(model: torch.nn.Module) -> str | None:
    """``None`` when the static decoder can run ``model`` (every cache layer full attention, an attention
    implementation in :data:`MASKED_IMPLEMENTATIONS`), else why not."""
    config = _inner_model(model).config
    implementation = getattr(config, "_attn_implementation", None)
    if implementation not in MASKED_IMPLEMENTATIONS:
        return f"its attention implementation {implementation!r} is not one of {', '.join(MASKED_IMPLEMENTATIONS)}"
    try:
        layers = StaticCache(config=config, max_cache_len=CAPACITY_BUCKET).layers
    except Exception as exc:  # a config transformers cannot build a static cache for
        return f"transformers builds no static cache for it ({type(exc).__name__}: {exc})"
    others = sorted({type(layer).__name__ for layer in layers if type(layer) is not StaticLayer})
    return f"its cache has {', '.join(others)} layers (sliding windows or recurrent state)" if others else None


class _CastingLayer(StaticLayer):
    """A static cache layer that writes a step's keys and values in the dtypes it holds.

    Under autocast the dtypes differ: the rotary embedding returns float32 keys and the value projection
    bfloat16 values, and transformers 5.17 allocates both of a layer's buffers in the keys' dtype (its dynamic
    cache, the plain decoder's, promotes the values to float32 the same way, by concatenating). The in-place
    write of a bfloat16 value into a float32 buffer then fails; cast, it stores exactly what the plain decoder
    holds. Where the dtypes already agree the casts are no-ops."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.is_initialized:
            key_states, value_states = key_states.to(self.keys.dtype), value_states.to(self.values.dtype)
        return super().update(key_states, value_states, *args, **kwargs)


@dataclass
class _ShapeBuffers:
    """The fixed buffers of one (rows, capacity, dtype, device) shape, and its captured graph if any."""

    cache: StaticCache
    token: torch.Tensor  # [rows, 1]: the token to feed
    position: torch.Tensor  # [rows, 1]: its position id
    mask: torch.Tensor  # [rows, 1, 1, capacity]: what each row attends to
    graph: GraphCapture | None = None
    tried_graph: bool = field(default=False)


class StaticDecoder:
    """Decodes with fixed-shape steps (module docstring); ``use_graphs``: capture each shape's step as a
    CUDA graph (CUDA only). ``on_graph_failure(reason)`` is called when a capture fails; graphs then stay
    off and the steps run eagerly. ``capture(step, rewind)`` records a step (:func:`opct.sampling.cuda_graphs.capture_step`).
    ``grouped_attention``: a grouped-query SDPA model's steps attend without copying the cache
    (:mod:`opct.sampling.grouped_query_attention`)."""

    def __init__(self, model: torch.nn.Module, pad_id: int, eos_ids: list[int], use_graphs: bool = False,
                 on_graph_failure: Callable[[str], None] | None = None,
                 capture: Callable[[Callable[[], torch.Tensor], Callable[[], None]], GraphCapture] = capture_step,
                 grouped_attention: bool = True):
        self.model = model
        self.grouped_attention = grouped_attention
        self.pad_id = pad_id
        self.eos_ids = eos_ids
        self.use_graphs = use_graphs
        self.on_graph_failure = on_graph_failure
        self.capture = capture
        self._shapes: dict[tuple, _ShapeBuffers] = {}

    def clear(self) -> None:
        """Drop every kept shape's buffers and graph (their memory goes back)."""
        self._shapes.clear()

    def decode(self, prompt_cache: DynamicCache, attention: torch.Tensor, first_logits: torch.Tensor,
               next_position: torch.Tensor, chooser: Callable[[torch.Tensor, int], torch.Tensor], steps: int) -> None:
        """Decode up to ``steps`` tokens for every row: ``prompt_cache`` holds each row's encoded prompt
        (left-padded, ``attention`` its ``[rows, width]`` mask), ``first_logits`` the first token's
        ``[rows, vocab]`` logits, ``next_position`` ``[rows, 1]`` the first new token's position id."""
        rows, width = attention.shape
        buffers = self._buffers(prompt_cache, rows, static_capacity(width, steps), attention.device)
        self._load(buffers, prompt_cache, attention, next_position)
        eos = torch.tensor(self.eos_ids, device=attention.device)
        done = torch.zeros(rows, dtype=torch.bool, device=attention.device)
        logits = first_logits
        with grouped_query_decoding(grouped_query_configs(self.model) if self.grouped_attention else []):
            for step in range(steps):
                token = chooser(logits, step)  # [rows]
                token = torch.where(done, torch.full_like(token, self.pad_id), token)
                done = done | torch.isin(token, eos)
                if step == steps - 1 or ((step + 1) % EOS_CHECK_EVERY == 0 and bool(done.all())):
                    return
                logits = self._step(buffers, token, width + step)

    def _buffers(self, prompt_cache: DynamicCache, rows: int, capacity: int, device: torch.device) -> _ShapeBuffers:
        dtype = prompt_cache.layers[0].keys.dtype
        key = (rows, capacity, dtype, device)
        if key in self._shapes:
            self._shapes[key] = self._shapes.pop(key)  # the most recently used last
        else:
            while len(self._shapes) >= KEPT_SHAPES:
                del self._shapes[next(iter(self._shapes))]
            config = _inner_model(self.model).config
            if config._attn_implementation == "sdpa":
                mask = torch.zeros((rows, 1, 1, capacity), dtype=torch.bool, device=device)
            else:  # eager: added to the scores
                mask = torch.full((rows, 1, 1, capacity), torch.finfo(dtype).min, dtype=dtype, device=device)
            self._shapes[key] = _ShapeBuffers(
                cache=StaticCache(config=config, max_cache_len=capacity),
                token=torch.zeros((rows, 1), dtype=torch.long, device=device),
                position=torch.zeros((rows, 1), dtype=torch.long, device=device),
                mask=mask,
            )
        return self._shapes[key]

    @staticmethod
    def _load(buffers: _ShapeBuffers, prompt_cache: DynamicCache, attention: torch.Tensor,
              next_position: torch.Tensor) -> None:
        """Copy the encoded prompts into the static buffers (in place: a captured graph keeps its addresses)."""
        width = attention.shape[1]
        for static, layer in zip(buffers.cache.layers, prompt_cache.layers, strict=True):
            if not static.is_initialized:
                static.lazy_initialization(layer.keys, layer.values)
                static.__class__ = _CastingLayer
            static.keys[:, :, :width].copy_(layer.keys)
            static.values[:, :, :width].copy_(layer.values)
            static.cumulative_length.fill_(width)
        mask = buffers.mask
        if mask.dtype == torch.bool:
            mask.zero_()
            mask[:, 0, 0, :width] = attention.bool()
        else:
            mask.fill_(torch.finfo(mask.dtype).min)
            mask[:, 0, 0, :width] = torch.where(attention.bool(), 0.0, torch.finfo(mask.dtype).min)
        buffers.position.copy_(next_position)

    def _forward(self, buffers: _ShapeBuffers) -> torch.Tensor:
        out = self.model(input_ids=buffers.token, attention_mask=buffers.mask, position_ids=buffers.position,
                         **cache_kwargs(self.model, buffers.cache), use_cache=True)
        return out.logits[:, -1, :]

    def _step(self, buffers: _ShapeBuffers, token: torch.Tensor, position: int) -> torch.Tensor:
        """The next logits after feeding ``token`` at cache position ``position`` (the same for every row)."""
        buffers.token.copy_(token[:, None])
        buffers.mask[:, 0, 0, position] = True if buffers.mask.dtype == torch.bool else 0.0
        if self.use_graphs and not buffers.tried_graph:
            buffers.tried_graph = True
            buffers.graph = self._capture(buffers)
        logits = buffers.graph.replay() if buffers.graph is not None else self._forward(buffers)
        buffers.position.add_(1)
        return logits

    def _capture(self, buffers: _ShapeBuffers) -> GraphCapture | None:
        """The step of ``buffers``' shape as a replayable graph; ``None`` (graphs off, said once) when capture fails.

        Warm-up and capture run the step once more each; the cache's position counters are put back after
        each, so that the replay that follows writes the same position (with the same values)."""
        counters = [layer.cumulative_length.clone() for layer in buffers.cache.layers]

        def rewind() -> None:
            for layer, counter in zip(buffers.cache.layers, counters, strict=True):
                layer.cumulative_length.copy_(counter)

        try:
            with uncached_autocast(buffers.token.device.type):  # casts recorded, not cached (cuda_graphs docstring)
                graph = self.capture(lambda: self._forward(buffers), rewind)
        except Exception as exc:  # a capture that fails for any reason: decode eagerly
            rewind()
            self.use_graphs = False
            if self.on_graph_failure is not None:
                self.on_graph_failure(f"{type(exc).__name__}: {exc}")
            return None
        rewind()
        return graph
