"""One decode step captured as a CUDA graph: recorded once, then replayed with a single launch.

A decode step of a small model is hundreds of kernel launches from Python, each a few microseconds of
host time; on a GPU the host, not the device, then sets the pace. A CUDA graph records the launches of
one step over fixed buffers (:mod:`opct.sampling.static_decoder` keeps them) and replays them all at
once. Only :func:`capture_step` needs CUDA; :class:`GraphCapture` is what it returns, and what a test on
a CPU builds from any callable to run the static decoder's graph bookkeeping.

**Graphs are recorded with autocast's cast cache off** (:func:`uncached_autocast`). Inside an autocast region
the low-precision cast of a trainable float32 leaf (a fully fine-tuned weight; a PEFT adapter, which PEFT keeps
in float32) is made once and cached for the rest of the region. A step captured while that cache is warm
records no cast at all: the graph reads the cached copies, which are freed when the region ends, and a later
replay computes with freed or stale memory, and never sees the optimizer's updates. With the cache off, the
casts are kernels of the graph, re-read from the live float32 weights at every replay. (The alternative,
dropping every graph at the end of each sampling call, would pay a warm-up and a capture per shape per call.)
The weights must still be updated in place, as optimizers and :class:`opct.sampling.merged_lora.MergedLoraModel`
do; ``torch.cuda.make_graphed_callables`` refuses the cached case outright for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch


class GraphCapture:
    """A captured step: ``replay()`` runs it again and returns its output buffer (overwritten by each replay)."""

    def __init__(self, replay: Callable[[], object], output: torch.Tensor):
        self._replay = replay
        self.output = output

    def replay(self) -> torch.Tensor:
        """Run the captured step; its result is in :attr:`output` (returned)."""
        self._replay()
        return self.output


def uncached_autocast(device_type: str) -> AbstractContextManager[object]:
    """Autocast as it stands on ``device_type`` (the same dtype), with its cast cache off; nothing when autocast
    is not on there (module docstring: why a graph must be recorded so)."""
    if not torch.is_autocast_enabled(device_type):
        return nullcontext()
    return torch.autocast(device_type, dtype=torch.get_autocast_dtype(device_type), cache_enabled=False)


def capture_step(step: Callable[[], torch.Tensor], rewind: Callable[[], None]) -> GraphCapture:
    """``step`` (a function of fixed CUDA buffers returning a tensor) as a CUDA graph.

    ``step`` runs once eagerly first, on a side stream as CUDA graphs require (lazy initialisations, library
    workspaces), then ``rewind()`` undoes what that run advanced (the cache's position counters) before the
    capture records it. Raises whatever capture raises (a host sync inside ``step``, an operation that
    cannot be captured); the caller falls back to running ``step`` eagerly.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    rewind()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = step()
    return GraphCapture(graph.replay, output)
