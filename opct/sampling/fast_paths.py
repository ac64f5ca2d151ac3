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

A fast *decoder* (:mod:`opct.sampling.static_decoder`) is held to the decoder rule,
:func:`decoder_disagreement`, against the plain decoder on the same prompts and seeds. In float32 (or
float64) it must draw the same tokens, with every recorded log-prob within :data:`DECODER_FLOAT32_TOLERANCE`
of the plain decoder's. In bfloat16 or float16 the plain decoder itself differs from the trainer's
full-sequence forward (different kernels and shapes round differently: up to 3.14e-2 per token on an H100,
benchmarks/results/device-check-h100-20261128-run1.md), and tokens may part where two are nearly tied; so
the fast decoder is held against the trainer's forward instead, its largest deviation at most twice the
plain decoder's, measured in the same check, or :data:`DECODER_FLOOR` when that is larger.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

import torch

#: Per model: the fast path's name -> whether its self-check passed.
_VERDICTS: WeakKeyDictionary[torch.nn.Module, dict[str, bool]] = WeakKeyDictionary()
#: (model class, fast path) pairs already reported, so that a fallback is said once per process.
_SAID: set[tuple[str, str]] = set()

#: The largest |log-prob difference| (nats) a fast path may show against the plain forward, per dtype:
#: float32 rounding is about 1e-6 on these checks; bfloat16 has an 8-bit mantissa, float16 an 11-bit one.
TOLERANCE = {torch.float64: 1e-4, torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}

#: A fast decoder's largest |log-prob difference| from the plain decoder's in float32 / float64 (nats).
DECODER_FLOAT32_TOLERANCE = 1e-4
#: In a low precision, the fast decoder's deviation from the trainer's forward may always reach this much
#: (nats; about one unit in the last place of a log-prob near -2, as bfloat16 / float16 round it), however
#: close the plain decoder happened to come.
DECODER_FLOOR = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


class FastPathFallbackWarning(UserWarning):
    """A sampler or scorer fast path was turned off for a model: its self-check did not show it gives the
    plain forward's log-probs. Nothing is wrong with the run; it is slower than it could be."""


def compute_dtype(model: torch.nn.Module) -> torch.dtype:
    """The dtype ``model`` computes in: its parameters', or autocast's lower one."""
    param = next(model.parameters())
    dtype, device = param.dtype, param.device.type
    if dtype == torch.float32 and torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
    return dtype


def tolerance(model: torch.nn.Module) -> float:
    """The tolerance of :data:`TOLERANCE` for ``model``'s :func:`compute_dtype`."""
    return TOLERANCE.get(compute_dtype(model), TOLERANCE[torch.bfloat16])


def decoder_disagreement(model: torch.nn.Module, plain: list[Any], fast: list[Any], plain_deviation: float,
                         fast_deviation: float) -> str | None:
    """``None`` when a fast decoder's rollouts ``fast`` keep the decoder rule (module docstring) against the
    plain decoder's ``plain`` (the same prompts and seeds, :class:`opct.sampling.engine.Rollout`\\ s), else
    why not. ``*_deviation``: each one's largest |recorded - trainer's forward| log-prob."""
    dtype = compute_dtype(model)
    if dtype in (torch.float32, torch.float64):
        if [r.completion_ids for r in fast] != [r.completion_ids for r in plain]:
            return "it drew other tokens than the plain decoder"
        diff = max((abs(a - b) for f, p in zip(fast, plain, strict=True) for a, b in zip(f.logprobs, p.logprobs,
                                                                                         strict=True)), default=0.0)
        limit = DECODER_FLOAT32_TOLERANCE
        return None if diff <= limit else f"its log-probs differ from the plain decoder's by {diff:.1e} > {limit:.0e}"
    limit = max(2 * plain_deviation, DECODER_FLOOR.get(dtype, DECODER_FLOOR[torch.bfloat16]))
    if fast_deviation <= limit:
        return None
    return (f"its log-probs differ from the trainer's forward by {fast_deviation:.1e} > {limit:.1e} "
            f"(the plain decoder's: {plain_deviation:.1e})")


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
        if reason is not None:
            say_once(model, name, reason, consequence, stacklevel=3)
    return verdicts[name]


def say_once(model: torch.nn.Module, name: str, reason: str, consequence: str, stacklevel: int = 2) -> None:
    """Warn (:class:`FastPathFallbackWarning`) that fast path ``name`` is off for ``model`` because of ``reason``,
    once per model class and fast path in a process."""
    said = (_model_class(model), name)
    if said not in _SAID:
        _SAID.add(said)
        warnings.warn(FastPathFallbackWarning(f"{said[0]}: {name} is off ({reason}); {consequence}"),
                      stacklevel=stacklevel)
