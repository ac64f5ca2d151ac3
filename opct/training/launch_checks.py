"""What a run's settings must satisfy on the launch it is given, checked in one place (issue 73).

:func:`check_launch` is called by :func:`opct.training.loop.train` once the processes are known, before any
model loads, and by ``opct train --dry-run`` for the ``--gpus`` and ``--fsdp`` it plans: a dry run that says a
step fits is a step the launch accepts. It holds every check decided by the settings and the launch's layout
(the number of processes, and FSDP or not): the loop's own, and each method's (``check_launch`` of a
registered method class, such as OPCT's merged sampling under FSDP or ACT's hooks). What needs the data or the
model is checked when they load (a step larger than the pairs, the prompts' lengths, adapter module names).

:func:`check_trainable` refuses a model that would train 0 parameters, after it is built and before step 1.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from opct.config import ConfigError, RunConfig
from opct.methods import METHODS


def check_launch(cfg: RunConfig, *, processes: int, sharded: bool) -> None:
    """Refuse settings the launch on ``processes`` processes (sharded with FSDP when ``sharded``) cannot train."""
    pairs = cfg.train.pairs_per_step
    if pairs % processes:
        below = pairs - pairs % processes
        multiples = " or ".join(str(n) for n in (below, below + processes) if n > 0)
        raise ConfigError(
            f"train.pairs_per_step={pairs} must be divisible by the number of processes ({processes}): each process "
            f"takes an equal share of a step's pairs; set train.pairs_per_step to {multiples}, or launch on a number "
            f"of processes that divides {pairs}"
        )
    method_check = getattr(METHODS.get(cfg.method), "check_launch", None)
    if method_check is not None:
        method_check(cfg, processes=processes, sharded=sharded)


def check_trainable(parameters: Iterable[torch.nn.Parameter], cfg: RunConfig) -> None:
    """Refuse a run whose model has no trainable parameter: its optimizer would step nothing."""
    if not any(p.requires_grad and p.numel() for p in parameters):
        what = ("lora.target_modules (the modules adapted; all-linear adapts every linear layer) or "
                "lora.modules_to_save" if cfg.finetune == "lora" else "finetune (full trains every weight)")
        raise ConfigError(f"the model has 0 trainable parameters, so training would change nothing: check {what}")
