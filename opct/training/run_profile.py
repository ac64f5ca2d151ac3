"""The off-policy profile (:mod:`opct.diagnostics`) of a run's start, the built-in run-start hook
(:data:`OFF_POLICY_PROFILE`, registered in :mod:`opct.training.run_hooks`): measured once, before the first step,
on a seeded sample of the run's own training pairs (``profile.*`` settings), into ``diagnostics.json``
and the run manifest (``off_policy_profile``). A resumed run keeps the one its start measured. Off unless
``profile.pairs_per_axis`` is set (the organism's experiments set it; docs/training.md says why): an off
profile records why it was skipped.

At the start the student is the frozen teacher, so one model answers both prompts. Pairs whose ``teacher_prompt``
is their ``prompt`` (the GRPO attacker's) have nothing to profile: the run records why it skipped. The measurement
runs in the main process on whole weights; under FSDP it is skipped with the reason recorded
(``opct pairs profile`` measures the same on one device). It draws its samples from its own seeded
generators and changes no weight, so training after it is exactly what it would be without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opct.diagnostics.measure import measure_profile
from opct.methods.base import TrainContext
from opct.pairs import ConsistencyPair
from opct.runs.directory import RunDirectory
from opct.training.run_hooks import RunStart, RunStartHook


def profile_length(ctx: TrainContext) -> int:
    """``profile.max_new_tokens``, else the method's own generation length (OPCT's rollouts, BCT's targets),
    else ``validation.answers.max_new_tokens``."""
    cfg = ctx.cfg
    if cfg.profile.max_new_tokens:
        return cfg.profile.max_new_tokens
    settings = cfg.method_config
    gen = getattr(settings, "sampling", None) or getattr(settings, "targets", None)
    return int(getattr(gen, "max_new_tokens", 0) or cfg.validation.answers.max_new_tokens)


def measure_run_start(
    ctx: TrainContext, run: RunDirectory, pairs: list[ConsistencyPair],
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Measure the profile of the run-start model on ``pairs`` and write it to ``diagnostics.json`` (main
    process); returns it, or a record of why it was skipped."""
    cfg, acc = ctx.cfg, ctx.accelerator
    if not cfg.profile.pairs_per_axis:
        profile: dict[str, Any] = {"skipped": "profile.pairs_per_axis is 0"}
    elif all(p.prompt == p.teacher_prompt for p in pairs):  # e.g. the GRPO attacker's pairs: no cue to profile
        profile = {"skipped": "every pair's teacher_prompt is its prompt: BCT's target would be the answer itself"}
    elif ctx.sharded:
        profile = {"skipped": "not measured under FSDP: opct pairs profile measures it on one device"}
    elif acc.is_main_process:
        t0 = time.perf_counter()
        with acc.autocast():
            profile = measure_profile(ctx.policy, ctx.tokenizer, pairs, spec=cfg.model,
                                      pairs_per_axis=cfg.profile.pairs_per_axis, max_new_tokens=profile_length(ctx),
                                      pairs_per_batch=cfg.train.sequences_per_microbatch, progress=progress,
                                      whole_logits_max_mib=cfg.train.whole_logits_max_mib)
        profile["seconds"] = round(time.perf_counter() - t0, 3)
    else:
        profile = {}
    if acc.is_main_process:
        run.write_diagnostics(profile)
    acc.wait_for_everyone()
    return profile


def _start(start: RunStart) -> dict[str, Any]:
    return measure_run_start(start.ctx, start.run, start.pairs)


def _resume(start: RunStart) -> dict[str, Any] | None:
    return start.run.read_diagnostics()  # the profile the run's start measured


#: The run-start hook: measures the profile at a run's start; a resumed run reads back what its start wrote.
OFF_POLICY_PROFILE = RunStartHook(start=_start, resume=_resume, record_as="off_policy_profile")
