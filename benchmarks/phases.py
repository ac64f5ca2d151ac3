"""Where a training step's time goes, measured the same way for every framework.

:func:`instrument` wraps a few functions at class level (never the frameworks' own code paths, only
timers around them) and charges each call's wall time to one phase:

* ``generation``: the sampler's call (``HFSampler.generate`` for opct, ``GenerationMixin.generate``
  for TRL), everything inside it included;
* ``teacher``: a forward of the causal LM outside generation with gradients off;
* ``student_forward``: a forward of the causal LM with gradients on;
* ``backward``: ``Accelerator.backward``;
* ``optimizer``: gradient clipping and the optimizer's ``step``;
* ``other``: the rest of the step (loss arithmetic, data, bookkeeping), the step time minus the phases.

A call inside a phase already running is charged to the outer phase (a forward inside ``generate`` is
generation), so the phases never overlap and add up to at most the step time. On CUDA the device is
synchronised at each phase boundary. A step ends when the optimizer's step returns: each snapshot of
the running totals taken there gives one step's phase times.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

PHASES = ("generation", "teacher", "student_forward", "backward", "optimizer")


class PhaseTimer:
    """Running per-phase totals and a snapshot at every optimizer step."""

    def __init__(self, sync: Callable[[], None] = lambda: None):
        self.sync = sync
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.active: str | None = None
        self.steps: list[dict[str, float]] = []

    def wrap(self, owner: Any, name: str, phase: str | Callable[[], str], ends_step: bool = False) -> None:
        """Replace ``owner.name`` by a timed call charged to ``phase`` (or to ``phase()`` at call time)."""
        original = getattr(owner, name)
        timer = self

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if timer.active is not None:  # inside another phase: charged to it
                return original(*args, **kwargs)
            which = phase() if callable(phase) else phase
            timer.sync()
            timer.active, start = which, time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                timer.sync()
                timer.totals[which] += time.perf_counter() - start
                timer.active = None
                if ends_step:
                    timer.steps.append(dict(timer.totals))

        setattr(owner, name, timed)

    def per_step(self) -> list[dict[str, float]]:
        """Each optimizer step's time per phase (differences of consecutive snapshots)."""
        out, last = [], dict.fromkeys(PHASES, 0.0)
        for snap in self.steps:
            out.append({p: snap[p] - last[p] for p in PHASES})
            last = snap
        return out


def forward_phase() -> str:
    """A forward outside generation: the teacher's without gradients, the student's with them."""
    import torch

    return "student_forward" if torch.is_grad_enabled() else "teacher"


def instrument(framework: str, model_class: type, device: str) -> PhaseTimer:
    """Install the timers for ``framework`` (``opct`` or ``trl``) around ``model_class.forward``."""
    import torch
    from accelerate import Accelerator

    timer = PhaseTimer(torch.cuda.synchronize if device.startswith("cuda") else lambda: None)
    if framework == "opct":
        from opct.sampling.hf_sampler import HFSampler

        timer.wrap(HFSampler, "generate", "generation")
    else:
        from transformers.generation.utils import GenerationMixin

        timer.wrap(GenerationMixin, "generate", "generation")
    timer.wrap(model_class, "forward", forward_phase)
    timer.wrap(Accelerator, "backward", "backward")
    timer.wrap(Accelerator, "clip_grad_norm_", "optimizer")
    timer.wrap(torch.optim.AdamW, "step", "optimizer", ends_step=True)
    return timer
