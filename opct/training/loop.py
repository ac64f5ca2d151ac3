"""The one training loop every method shares, on accelerate.

Each optimizer step takes ``train.pairs_per_step`` pairs (over all processes), lets the method turn
this process's share into microbatches, accumulates gradients over them with the loss normalised
by the number of completion tokens in the *global* batch, then clips and steps. Checkpoints are
written atomically and read without pickle (:mod:`opct.runs.checkpoint`); a run restarted in the same
directory resumes from the newest valid one and ends with the same weights as an uninterrupted run
(what a rerun may change is in :mod:`opct.runs.resume`). One process trains in a directory at a time.
"""

from __future__ import annotations

import math
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from transformers import get_scheduler

from opct.config import RunConfig, dump_config
from opct.errors import OpctWarning
from opct.methods import METHODS
from opct.methods.base import TrainContext
from opct.models import (
    add_lora,
    disable_dropout,
    load_model,
    load_tokenizer,
    make_teacher,
    weights_sha256,
)
from opct.pairs import ConsistencyPair
from opct.runs.directory import RunDirectory
from opct.runs.errors import RunDirError
from opct.runs.lock import on_main
from opct.runs.manifest import build_manifest, hash_records
from opct.runs.outputs import claim_run_directory
from opct.training import fsdp
from opct.training.activation_checkpointing import (
    check_accelerate_checkpointing,
    enable_gradient_checkpointing,
)
from opct.training.batches import length_notice, load_training_pairs, seed_step, step_indices, total_steps
from opct.training.health import check_weights, healthy_update
from opct.training.launch_checks import check_launch, check_trainable
from opct.training.master_weights import make_optimizer
from opct.training.plugins import VALIDATION_JUDGES
from opct.training.progress import training_progress
from opct.training.prompt_checks import check_prompts
from opct.training.run_hooks import RunStart, run_start_hooks
from opct.training.sharded_loading import load_sharded
from opct.training.tracking import check_trackers, init_kwargs, project_name, step_metrics, tracker_hparams
from opct.training.validation import (
    Validator,
    check_disjoint,
    judge_microbatches,
    load_validation_pairs,
)


@dataclass
class TrainResult:
    """Where a training's outputs are. ``steps``: the run's total; ``start_step``: where this call began
    (``steps`` for a run that was already complete: nothing was trained)."""

    run_dir: Path
    steps: int
    final_dir: Path
    is_main_process: bool = True
    start_step: int = 0

    @property
    def already_complete(self) -> bool:
        """Whether the run was finished before this call, which trained nothing."""
        return self.start_step >= self.steps


class TrainerState:
    """Progress: the number of optimizer steps done (saved in every checkpoint's ``state.json``)."""

    def __init__(self) -> None:
        self.step = 0


def _has_accelerator_device() -> bool:
    xpu = getattr(torch, "xpu", None)
    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or bool(xpu and xpu.is_available()) or bool(mps and mps.is_available())


def _make_accelerator(cfg: RunConfig, run: RunDirectory) -> Accelerator:
    from accelerate.utils import ProjectConfiguration

    kwargs: dict[str, Any] = {}
    if cfg.train.trackers:
        kwargs["log_with"] = list(cfg.train.trackers)
    fsdp.refuse_deepspeed()
    acc = Accelerator(
        cpu=not _has_accelerator_device(),
        mixed_precision=cfg.train.mixed_precision,
        project_config=ProjectConfiguration(project_dir=str(run.root), logging_dir=str(run.layout.trackers)),
        **kwargs,
    )
    fsdp.enable_cpu_fsdp(acc)  # accelerate keeps DDP on CPU even when FSDP was asked for
    return acc


def train(cfg: RunConfig, show_progress: bool = True) -> TrainResult:
    """Run (or resume) the training run described by ``cfg``; returns where its outputs are.

    The run directory is locked while it trains: a second training there stops naming this one's pid.
    Every pair is checked before any weights load (:mod:`opct.training.prompt_checks`: lengths against
    the model's positions, special-token text); a step whose loss, gradient or weights are not finite
    stops the run before anything of it is saved (:mod:`opct.training.health`).
    """
    check_trackers(cfg)  # a tracker that cannot start fails now, before any load and with no run folder made
    pairs = load_training_pairs(cfg)
    if notice := length_notice(cfg, len(pairs)):
        warnings.warn(notice, OpctWarning, stacklevel=2)
    validation = load_validation_pairs(cfg) if cfg.validation.every else []
    check_disjoint(pairs, validation)
    tokenizer = load_tokenizer(
        cfg.model.name_or_path, cfg.model.chat_template, cfg.model.revision, cfg.model.trust_remote_code
    )
    pairs, validation = check_prompts(cfg, tokenizer, pairs, validation)
    claim_run_directory(cfg.run_dir)  # a folder of someone else's files is never trained into
    run = RunDirectory(cfg.run_dir)
    acc = _make_accelerator(cfg, run)
    with run.locked(acc):
        return _train(cfg, acc, run, pairs, validation, tokenizer, show_progress)


def _train(
    cfg: RunConfig, acc: Accelerator, run: RunDirectory, pairs: list[ConsistencyPair],
    validation: list[ConsistencyPair], tokenizer: Any, show_progress: bool,
) -> TrainResult:
    fsdp.check_distribution(acc)
    check_accelerate_checkpointing(acc)
    sharded = fsdp.is_fsdp(acc)
    sharding = fsdp if sharded else None  # how a checkpoint gathers and loads the sharded state
    check_launch(cfg, processes=acc.num_processes, sharded=sharded)  # the dry run's checks too, before any load
    if cfg.train.pairs_per_step > len(pairs):
        raise ValueError(
            f"train.pairs_per_step={cfg.train.pairs_per_step} is more than the {len(pairs)} training pairs: a step would "
            f"repeat pairs within itself; set train.pairs_per_step to at most {len(pairs)}"
        )
    data_hash = hash_records([p.to_dict() for p in pairs])
    seed_step(cfg.seed, 0, 0)

    if sharded:  # only rank 0 reads the weights; policy and teacher come back sharded (no full copy anywhere)
        model, teacher, base_weights = load_sharded(acc, cfg)
    else:
        model = load_model(cfg.model)
        base_weights = weights_sha256(model)  # the base as loaded: what final/ records (in full) and eval checks
        if cfg.train.disable_dropout:
            disable_dropout(model)
        if cfg.finetune == "lora":
            model = add_lora(model, cfg.lora)
        teacher = make_teacher(model, fingerprint=base_weights[:16])  # the run's identity (manifest, resume), as before
        if not teacher.shares_weights:
            teacher.model.to(acc.device)
    check_trainable(model.parameters(), cfg)  # 0 trainable parameters: refused before anything is written
    if cfg.train.gradient_checkpointing:  # after the teacher's copy: the frozen teacher is never checkpointed
        enable_gradient_checkpointing(model)

    steps = total_steps(cfg, len(pairs))
    start = on_main(acc, lambda: run.resume_point(cfg, teacher.fingerprint, data_hash, steps))
    if acc.is_main_process and start.checkpoint is None:  # starting over: nothing of an earlier attempt is kept
        run.clear_logs()
    layout: dict[str, Any] = {}

    def write_manifest() -> None:  # a finished run rerun as it was records nothing new
        if not acc.is_main_process or start.finished:
            return
        run.write_manifest(
            build_manifest(
                "train",
                dump_config(cfg),
                method=cfg.method,
                seeds={"seed": cfg.seed},
                data_files=cfg.data.train,
                data_hash=data_hash,
                num_pairs=len(pairs),
                teacher_fingerprint=teacher.fingerprint,
                model_class=type(model).__name__,
                compute=dict(METHODS.get(cfg.method).compute),
                num_processes=acc.num_processes,
                mixed_precision=cfg.train.mixed_precision,
                total_steps=steps,
                **layout,
            ),
        )

    if start.checkpoint is None and not sharded:
        write_manifest()  # a resume rewrites it only once its checkpoint has loaded
    acc.wait_for_everyone()

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, cfg.optim)  # AdamW, on fp32 master copies of half-precision weights
    schedule = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}[cfg.optim.schedule]
    scheduler = get_scheduler(schedule, optimizer, num_warmup_steps=cfg.optim.warmup_steps, num_training_steps=steps)
    prepared, optimizer = acc.prepare(model, optimizer)
    state = TrainerState()
    if sharded:  # sharded in place: under LoRA the teacher is still the policy itself
        if teacher.shares_weights:
            teacher.model = acc.unwrap_model(prepared)
        layout["fsdp"] = fsdp.layout(acc, acc.unwrap_model(prepared), teacher.model, teacher.shares_weights)
        if start.checkpoint is None:
            write_manifest()
        acc.wait_for_everyone()

    ctx = TrainContext(
        cfg=cfg,
        accelerator=acc,
        model=prepared,
        policy=acc.unwrap_model(prepared),
        tokenizer=tokenizer,
        teacher=teacher,
        run_dir=run.root,
        gather=fsdp.gathered if sharded else None,
    )
    method = METHODS.get(cfg.method)(ctx)
    method.setup(pairs)
    # the run-start hooks (opct/training/run_hooks.py), before step 1; a resumed run recalls their records
    layout.update(run_start_hooks(RunStart(ctx, run, pairs, validation), resumed=start.checkpoint is not None))
    if start.checkpoint is None:
        write_manifest()

    if start.checkpoint is not None:
        state.step = run.load_checkpoint(
            start.checkpoint, acc.unwrap_model(prepared), optimizer, scheduler, acc.scaler, sharding
        )
        write_manifest()
        if acc.is_main_process:
            run.recover_logs(state.step)
    if cfg.train.trackers:  # one project, this run named in it; its keys namespaced (opct/training/tracking.py)
        acc.init_trackers(project_name(cfg), config=tracker_hparams(cfg), init_kwargs=init_kwargs(cfg, run.layout))

    writer = run.metrics_writer(acc.is_main_process, cfg.train.log_rollouts)
    validator = Validator(ctx, validation) if validation else None
    val_log = run.validation_writer(acc.is_main_process)
    if validator is not None and start.checkpoint is None:
        val_log.write(validator.measure(0))  # the run-start policy: every curve's first point
    judge = VALIDATION_JUDGES.get(cfg.validation.judge) if cfg.validation.judge else None
    start_step = state.step
    progress = training_progress(show_progress and state.step < steps, acc.is_main_process)  # no bar when nothing trains
    with progress as bar:
        task = bar.add_task(f"{cfg.method} {cfg.name}", total=steps, completed=state.step, loss="-", kl="-") if bar else None
        while state.step < steps:
            step = state.step
            record, rollouts = _train_step(ctx, method, optimizer, scheduler, pairs, step, judge)
            state.step = step + 1
            measured: dict[str, Any] = {}
            if validator is not None and (state.step % (cfg.validation.every or 1) == 0 or state.step == steps):
                measured = validator.measure(state.step)
                val_log.write(measured)
                record.update({k: v for k, v in measured.items() if k != "step"})
            writer.write(record, rollouts)
            if cfg.train.trackers:
                acc.log(step_metrics(record, set(measured)), step=step + 1)
            if state.step % cfg.train.checkpoint_every == 0 or state.step == steps:
                run.save_checkpoint(acc, state.step, cfg.train.keep_checkpoints, prepared, optimizer, scheduler, sharding)
            if bar is not None:
                kl = record.get("kl_to_teacher")
                bar.update(task, completed=state.step, loss=f"{record['loss']:.4f}", kl="-" if kl is None else f"{kl:.4f}")
    identity = {"base_weights": base_weights, "data_hash": data_hash, "num_pairs": len(pairs)}
    final = run.save_final(acc, prepared, tokenizer, cfg, identity)
    if cfg.train.trackers:
        acc.end_training()
    return TrainResult(run_dir=run.root, steps=steps, final_dir=final, is_main_process=acc.is_main_process,
                       start_step=start_step)


def _train_step(ctx: TrainContext, method: Any, optimizer, scheduler, pairs, step: int, judge: Any = None):
    cfg, acc = ctx.cfg, ctx.accelerator
    t0 = time.perf_counter()
    seed_step(cfg.seed, step, acc.process_index)
    indices = step_indices(step, len(pairs), cfg.train.pairs_per_step, cfg.seed, cfg.data.shuffle)
    mine = [pairs[i] for i in indices[acc.process_index :: acc.num_processes]]
    micro = method.prepare(mine, step)
    judged = judge_microbatches(judge, micro, ctx.tokenizer) if judge is not None and method.logs_rollouts else {}
    if ctx.sharded:
        fsdp.check_microbatch_count(acc, len(micro))
    t_prepare = time.perf_counter() - t0
    local_tokens = sum(mb.num_tokens for mb in micro)
    global_tokens = acc.reduce(torch.tensor(float(local_tokens), device=acc.device), reduction="sum").item()
    scale = acc.num_processes / max(global_tokens, 1.0)
    ctx.model.train()
    totals: dict[str, float] = {"loss_sum": 0.0}
    largest = {key for key, unit in method.stats.values() if unit == "max"}  # a largest value, not a sum
    for i, mb in enumerate(micro):
        sync = nullcontext() if i == len(micro) - 1 else acc.no_sync(ctx.model)
        with sync:
            loss_sum, stats = method.loss(mb)
            acc.backward(loss_sum * scale)
        totals["loss_sum"] += loss_sum.item()
        for k, v in stats.items():
            totals[k] = max(totals.get(k, v), v) if k in largest else totals.get(k, 0.0) + v
    # measured even unclipped (an infinite bound scales by 1): a non-finite norm stops the step below
    grad_norm = acc.clip_grad_norm_(ctx.model.parameters(), cfg.optim.max_grad_norm or math.inf)
    keys = sorted(k for k in totals if k not in largest)
    summed = acc.reduce(torch.tensor([totals[k] for k in keys], device=acc.device, dtype=torch.float64), "sum")
    g = dict(zip(keys, summed.tolist(), strict=True))
    for k in sorted(largest):  # every process gathers every key, with or without microbatches
        g[k] = acc.gather(torch.tensor([totals.get(k, 0.0)], device=acc.device, dtype=torch.float64)).max().item()
    update = healthy_update(ctx, step, g["loss_sum"], grad_norm)
    if update:
        optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    if update:
        check_weights(ctx, step)
    elapsed = time.perf_counter() - t0
    record: dict[str, Any] = {
        "step": step + 1,
        "epoch": round((step + 1) * cfg.train.pairs_per_step / len(pairs), 4),
        "loss": g["loss_sum"] / max(global_tokens, 1.0),
        "completion_tokens": int(global_tokens),
        "completion_len": global_tokens / max(g.get("sequences", 1.0), 1.0),
        "truncation_rate": g.get("truncated", 0.0) / max(g.get("sequences", 1.0), 1.0),
        "tokens_per_s": global_tokens / elapsed,
        "lr": scheduler.get_last_lr()[0],
        "step_time_s": elapsed,
        "prepare_time_s": t_prepare,
    }
    per = {"tokens": max(global_tokens, 1.0), "sequences": max(g.get("sequences", 1.0), 1.0), "max": 1.0}
    for name, (key, unit) in method.stats.items():
        record[name] = g[key] / per[unit]
    record["grad_norm"] = float(grad_norm)
    if cfg.train.on_nonfinite == "skip":
        record["nonfinite_skipped"] = int(not update)
    record.update(judged)
    rollouts: list[dict[str, Any]] = []
    if cfg.train.log_rollouts and method.logs_rollouts:
        from accelerate.utils import gather_object

        local = [
            {
                "step": step + 1,
                "pair_id": mb.pairs[mb.pair_of[j]].id,
                "completion": ctx.tokenizer.decode(c, skip_special_tokens=False),
                "tokens": len(c),
                "truncated": bool(mb.truncated[j]) if mb.truncated else False,
                **({"reward": mb.rewards[j], "advantage": mb.advantages[j]} if mb.rewards and mb.advantages else {}),
            }
            for mb in micro
            for j, c in enumerate(mb.completions)
        ]
        rollouts = gather_object(local) if acc.num_processes > 1 else local
    return record, rollouts


__all__ = ["RunDirError", "TrainResult", "load_training_pairs", "total_steps", "train"]
