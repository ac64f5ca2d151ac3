"""A diverged step never becomes a checkpoint: non-finite losses, gradients and weights stop the run.

Each optimizer step is checked twice by the loop (:mod:`opct.training.loop`):

* before the update, the step's loss (summed over every process) and its gradient norm. A NaN or an
  infinity stops the run with :class:`TrainingDivergedError` (exit code 1, a fault) naming the step
  and the likely cause, before the optimizer touches the weights; ``train.on_nonfinite: skip`` skips
  that update instead and counts it (``nonfinite_skipped`` in ``metrics.jsonl``). Under fp16 mixed
  precision a non-finite gradient is the loss scaler's business (it skips the update and lowers its
  scale), so only a non-finite loss stops such a run;
* after the update, the trainable weights. An update that made one non-finite (an overflowing learning
  rate, ``optim.eps: 0`` on a zero gradient) always stops the run: those weights cannot be skipped.

The check runs before the step's checkpoint is written, so every checkpoint and ``final/`` holds
finite weights, and the checkpoints written before the failing step are kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from opct.config import RunConfig
from opct.errors import FAULT, OpctError
from opct.methods.base import TrainContext
from opct.runs.layout import RunLayout


class TrainingDivergedError(OpctError, RuntimeError):
    """A step's loss, gradient or weights are not finite numbers: the run stopped before saving them."""

    exit_code = FAULT


def is_finite(value: float | torch.Tensor | None) -> bool:
    """Whether a loss or norm is a finite number (None, a norm not measured, counts as finite)."""
    return value is None or math.isfinite(float(value))


def weights_finite(params: Iterable[torch.Tensor]) -> bool:
    """Whether every element of these weights (this process's share under FSDP) is finite, in one sync."""
    local = [p.to_local() if hasattr(p, "to_local") else p for p in params]  # an FSDP2 shard: its own part
    local = [p.detach() for p in local if p.numel()]
    if not local:
        return True
    largest = torch._foreach_norm(local, ord=math.inf)  # max |w| per tensor: NaN or inf exactly when one is
    return bool(torch.isfinite(torch.stack([m.float().to(largest[0].device) for m in largest])).all())


def likely_cause(cfg: RunConfig) -> str:
    """What usually makes a run diverge, with this run's own settings."""
    causes = [f"a learning rate too high (optim.lr={cfg.optim.lr:g}: lower it)"]
    if cfg.model.dtype == "float16" or cfg.train.mixed_precision == "fp16":
        causes.append("float16 overflowing (model.dtype/train.mixed_precision: use bfloat16 or float32)")
    elif cfg.model.dtype == "bfloat16" or cfg.train.mixed_precision == "bf16":
        causes.append("bfloat16 rounding (model.dtype/train.mixed_precision: try float32)")
    if cfg.optim.max_grad_norm is None:
        causes.append("no gradient clipping (optim.max_grad_norm is unset)")
    if cfg.optim.eps == 0:
        causes.append("optim.eps: 0 (Adam divides by the gradient's size; 0/0 on a zero gradient)")
    return "; ".join(causes)


def diverged(cfg: RunConfig, step: int, what: str, kept: int | None, skippable: bool = True) -> TrainingDivergedError:
    """The error for step ``step`` (1-based), whose ``what`` is not finite; ``kept`` is the newest checkpoint's
    step (None: none yet); ``skippable``: whether ``train.on_nonfinite: skip`` would have skipped it."""
    if kept is None:
        saved, rerun = "no checkpoint had been written yet", "Change the setting and rerun (the run starts over)"
    else:
        saved = f"the checkpoints up to step {kept} (written before it) are kept"
        rerun = ("A rerun resumes only with the same settings, so to change one train under another name (or delete "
                 "the run directory)")
    skip = ", or set train.on_nonfinite: skip to skip such steps" if skippable else ""
    return TrainingDivergedError(
        f"training diverged at step {step}: {what} is not a finite number (NaN or infinity). Nothing of this step "
        f"was saved; {saved}. Likely causes: {likely_cause(cfg)}. {rerun}{skip}."
    )


def _newest_checkpoint(ctx: TrainContext) -> int | None:
    found = RunLayout(ctx.run_dir).list_checkpoints()
    return found[-1][0] if found else None


def healthy_update(ctx: TrainContext, step: int, loss_sum: float, grad_norm: Any) -> bool:
    """Whether step ``step``'s update may be applied: loss and gradient norm finite (an fp16 loss scaler
    skips a non-finite gradient itself); else stop (:class:`TrainingDivergedError`) or, with
    ``train.on_nonfinite: skip``, False."""
    scaled = ctx.accelerator.scaler is not None
    bad = (f"the loss ({loss_sum})" if not is_finite(loss_sum) else
           None if scaled or is_finite(grad_norm) else f"the gradient norm ({float(grad_norm)})")
    if bad is not None and ctx.cfg.train.on_nonfinite == "stop":
        raise diverged(ctx.cfg, step + 1, bad, _newest_checkpoint(ctx))
    return bad is None


def check_weights(ctx: TrainContext, step: int) -> None:
    """Stop when step ``step``'s update made a trainable weight non-finite (on any process)."""
    acc = ctx.accelerator
    ok = weights_finite(p for p in ctx.model.parameters() if p.requires_grad)
    if acc.reduce(torch.tensor(float(ok), device=acc.device), reduction="sum").item() < acc.num_processes:
        raise diverged(ctx.cfg, step + 1, "a trainable weight after the update", _newest_checkpoint(ctx), skippable=False)
