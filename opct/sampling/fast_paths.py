"""Fast paths used only where they are shown to give the plain forward's numbers.

opct's sampler and scorer have fast paths that compute the same function as the model's plain forward
in fewer operations: a prompt prefilled once for all its samples (the sampler and the scorer), and decode
attention that reads each prompt's cached keys once (:mod:`opct.sampling.prefix_attention`). Each is the
same function only if the model's code does what transformers' conventions say it does; a model whose
attention is hand-written (Falcon reads ``config._attn_implementation`` itself and never reaches the
attention interface) can break that. OPCT is only correct if the sampler's log-probs are the policy's,
so a fast path must never be the reason a run is off-policy.

Each fast path is therefore enabled for a model only after a self-check on that model, run once (the
first time it is asked for, on a few tokens of random prompts): the fast path's log-probs against the
plain full-sequence forward's, within :func:`tolerance` of the model's dtype, and for the decode
attention also that every attention module called it (checked on the modules, not the config). A path
that fails, or raises, is turned off for that model and :func:`check_once` says so in one warning line
(:class:`FastPathFallbackWarning`); the plain path runs instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from weakref import WeakKeyDictionary

import torch

#: Per model: the fast path's name -> whether its self-check passed.
_VERDICTS: WeakKeyDictionary[torch.nn.Module, dict[str, bool]] = WeakKeyDictionary()
#: (model class, fast path) pairs already reported, so that a fallback is said once per process.
_SAID: set[tuple[str, str]] = set()

#: The largest |log-prob difference| (nats) a fast path may show against the plain forward, per dtype:
#: float32 rounding is about 1e-6 on these checks; bfloat16 has an 8-bit mantissa, float16 an 11-bit one.
TOLERANCE = {torch.float64: 1e-4, torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}


class FastPathFallbackWarning(UserWarning):
    """A sampler or scorer fast path was turned off for a model: its self-check did not show it gives the
    plain forward's log-probs. Nothing is wrong with the run; it is slower than it could be."""


def tolerance(model: torch.nn.Module) -> float:
    """The tolerance of :data:`TOLERANCE` for ``model``'s parameter dtype (or autocast's lower one)."""
    param = next(model.parameters())
    dtype, device = param.dtype, param.device.type
    if dtype == torch.float32 and torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
    return TOLERANCE.get(dtype, TOLERANCE[torch.bfloat16])


def probe_prompts(model: torch.nn.Module, lengths: tuple[int, ...] = (24, 17)) -> list[list[int]]:
    """Random prompts of ``lengths`` tokens (seeded; ids below 1000 and the vocabulary's size), unequal so that
    one is left-padded, and longer than the 16-position sliding windows of the family tests."""
    vocab = model.get_output_embeddings().weight.shape[0] if hasattr(model, "get_output_embeddings") else 1000
    generator = torch.Generator().manual_seed(0)
    return [torch.randint(0, min(vocab, 1000), (n,), generator=generator).tolist() for n in lengths]


def largest_difference(got: torch.Tensor, want: torch.Tensor, mask: torch.Tensor) -> float:
    """The largest |got - want| over ``mask``'s positions (``inf`` where either is not finite)."""
    diff = (got.float() - want.float()).abs().masked_fill(~mask.bool(), 0.0)
    return float(diff.max()) if bool(torch.isfinite(diff).all()) else float("inf")


def _model_class(model: torch.nn.Module) -> str:
    """The class name of the transformers model inside ``model`` (a PEFT or accelerate wrapper says nothing)."""
    from transformers import PreTrainedModel

    return type(next((m for m in model.modules() if isinstance(m, PreTrainedModel)), model)).__name__


def check_once(model: torch.nn.Module, name: str, self_check: Callable[[], str | None], consequence: str) -> bool:
    """Whether fast path ``name`` is enabled for ``model``: ``self_check()`` returns ``None`` when it gives the
    plain forward's numbers, else why not (an exception it raises counts as a reason). Run once per model;
    a failure is said once per model class as a :class:`FastPathFallbackWarning` ending in ``consequence``."""
    verdicts = _VERDICTS.setdefault(model, {})
    if name not in verdicts:
        verdicts[name] = True  # while checking, the fast path is what runs
        try:
            reason = self_check()
        except Exception as exc:  # any failure of the fast path means: do not use it
            reason = f"it failed: {type(exc).__name__}: {exc}"
        verdicts[name] = reason is None
        said = (_model_class(model), name)
        if reason is not None and said not in _SAID:
            _SAID.add(said)
            warnings.warn(FastPathFallbackWarning(f"{said[0]}: {name} is off ({reason}); {consequence}"), stacklevel=2)
    return verdicts[name]
