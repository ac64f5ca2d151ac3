r"""A microbatch's completion logits read a chunk of positions at a time: given whole (``[N, L, V]``), or as
final hidden states and the output head (:mod:`opct.sampling.hidden_logits`), so that no ``[N, L, V]``
tensor, nor its gradient, is ever held.

:func:`map_position_chunks` applies a function to the logits of ``chunk_size`` selected positions at a time.
When gradients are needed each chunk runs under activation checkpointing (non-reentrant): its forward
keeps nothing but its inputs, and its backward recomputes the chunk's logits (the head's matmul, for
hidden states) and sends the gradient on to the hidden states and the head's weight (or to the whole
logits). At most a few ``[chunk_size, V]`` tensors exist at a time, in either pass.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.checkpoint import checkpoint

from opct.sampling.hidden_logits import OutputHead


def positions_fitting(max_mib: float, vocab: int) -> int:
    """How many positions' float32 logits over ``vocab`` tokens fit in ``max_mib`` MiB (``train.whole_logits_max_mib``):
    the one limit that decides whether logits are built whole and how many positions a chunk holds."""
    return int(max_mib * 2**20 // (4 * vocab))


class LogitRows:
    """Logits ``[N, L, V]`` of a microbatch's completion positions, read ``take(positions)`` at a time.

    Built from whole ``logits``, or from ``hidden`` states ``[N, L, H]`` and their ``head``.
    """

    def __init__(self, logits: torch.Tensor | None = None, hidden: torch.Tensor | None = None,
                 head: OutputHead | None = None):
        if (logits is None) == (hidden is None) or (hidden is not None and head is None):
            raise ValueError("LogitRows takes whole logits, or hidden states with their head")
        source = logits if logits is not None else hidden
        assert source is not None
        self.shape: tuple[int, int] = (source.shape[0], source.shape[1])
        self.flat = source.reshape(self.shape[0] * self.shape[1], source.shape[-1])  # [N*L, V] or [N*L, H]
        self.head = head if hidden is not None else None

    @property
    def device(self) -> torch.device:
        return self.flat.device

    @property
    def requires_grad(self) -> bool:
        """Whether a gradient can flow back from these logits (to the hidden states, the head, or the logits)."""
        head_grad = self.head is not None and any(p.requires_grad for p in self.head.layer.parameters())
        return self.flat.requires_grad or head_grad

    def take(self, positions: torch.Tensor) -> torch.Tensor:
        """Logits ``[len(positions), V]`` of flattened positions ``positions`` (indices into ``N * L``)."""
        rows = self.flat.index_select(0, positions)
        return self.head(rows) if self.head is not None else rows


def as_logit_rows(logits: torch.Tensor | LogitRows) -> LogitRows:
    """``logits`` as :class:`LogitRows` (whole ``[N, L, V]`` logits are wrapped)."""
    return logits if isinstance(logits, LogitRows) else LogitRows(logits=logits)


def map_position_chunks(
    fn: Callable[[torch.Tensor], torch.Tensor], positions: torch.Tensor, chunk_size: int, needs_grad: bool
) -> torch.Tensor:
    """``fn(chunk)`` for consecutive chunks of ``chunk_size`` of ``positions``, concatenated along dimension 0.

    With ``needs_grad`` (and gradients enabled) each call is checkpointed: its intermediates (the chunk's
    logits among them) are recomputed in the backward instead of being kept.
    """
    needs_grad = needs_grad and torch.is_grad_enabled()
    outs = []
    for start in range(0, positions.numel(), chunk_size):
        chunk = positions[start : start + chunk_size]
        outs.append(checkpoint(fn, chunk, use_reentrant=False) if needs_grad else fn(chunk))
    if not outs:
        return torch.zeros(0, device=positions.device)
    return torch.cat(outs)


def _up(x: torch.Tensor) -> torch.Tensor:
    """Work in at least float32 (float64 stays float64)."""
    return x if x.dtype == torch.float64 else x.float()


def logprobs_and_entropy(
    logits: LogitRows, targets: torch.Tensor, mask: torch.Tensor, chunk_size: int, grad: bool = True
) -> tuple[torch.Tensor, float]:
    """``log softmax(logits)[target]`` at every masked position as ``[N, L]`` (0 elsewhere; with gradients when
    ``grad``), and the summed entropy ``-sum_v p(v) log p(v)`` over the masked positions (no gradient).

    Computed in at least float32, ``chunk_size`` positions at a time.
    """
    positions = mask.reshape(-1).nonzero()[:, 0].to(logits.device)
    flat_targets = targets.reshape(-1).to(logits.device)

    def chunk_scores(chunk: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(_up(logits.take(chunk)), dim=-1)  # [c, V]
        picked = logp.gather(1, flat_targets.index_select(0, chunk)[:, None])[:, 0]
        entropy = -(logp.detach().exp() * logp.detach()).sum(-1)
        return torch.stack([picked, entropy], dim=1)  # [c, 2]

    with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
        scores = map_position_chunks(chunk_scores, positions, chunk_size, needs_grad=grad and logits.requires_grad)
    n, length = logits.shape
    dtype = scores.dtype if scores.numel() else torch.float32
    out = torch.zeros(n * length, dtype=dtype, device=logits.device)
    out = out.index_put((positions,), scores[:, 0]) if scores.numel() else out
    entropy = float(scores[:, 1].detach().sum()) if scores.numel() else 0.0
    return out.reshape(n, length), entropy
