"""The one training loop every method shares, on accelerate.

Each optimizer step takes ``train.batch_size`` pairs (over all processes), lets the method turn
this process's share into microbatches, accumulates gradients over them with the loss normalised
by the number of completion tokens in the *global* batch, then clips and steps. Checkpoints are
written atomically; a run restarted in the same directory resumes from the last one and ends with
the same weights as an uninterrupted run.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import shutil
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from transformers import get_scheduler

from opct.config import RunConfig, dump_config
from opct.manifest import build_manifest, hash_records, write_json_atomic
from opct.methods import METHODS, TrainContext
from opct.models import add_lora, is_peft, load_model, load_tokenizer, make_teacher
from opct.pairs import ConsistencyPair, read_pairs

RESUMABLE_CHANGES = {
    "output_dir",
    "train.max_steps",
    "train.epochs",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.trackers",
    "train.log_rollouts",
}


class RunDirError(RuntimeError):
    """The run directory cannot be used as asked (different config, different teacher...)."""


@dataclass
class TrainResult:
    run_dir: Path
    steps: int
    final_dir: Path
    is_main_process: bool = True


class TrainerState:
    """Progress saved with every checkpoint."""

    def __init__(self) -> None:
        self.step = 0

    def state_dict(self) -> dict[str, int]:
        return {"step": self.step}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.step = int(state["step"])


def load_training_pairs(cfg: RunConfig) -> list[ConsistencyPair]:
    """Read (and fully validate) every training pair file before any model is loaded."""
    if not cfg.data.train:
        raise ValueError("no training data: set data.train to one or more pair files")
    pairs: list[ConsistencyPair] = []
    for source in cfg.data.train:
        if source.startswith("organism:"):
            pairs.extend(organism_pairs(source))
        elif source.startswith("attacker:"):
            from opct.attack.attacker_data import file_attacker_pairs

            pairs.extend(file_attacker_pairs(source.split(":", 1)[1]))
        else:
            pairs.extend(read_pairs(source, columns=cfg.data.columns or None, split=cfg.data.split))
    if cfg.data.axes:
        pairs = [p for p in pairs if p.axis in cfg.data.axes]
        if not pairs:
            raise ValueError(f"no pairs left after keeping axes {cfg.data.axes}")
    ids = [p.id for p in pairs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"pair id {dup!r} appears in more than one training file; ids must be unique")
    return pairs


def organism_pairs(source: str) -> list[ConsistencyPair]:
    """Built-in pairs of the organism's world: ``organism:<axis>[:<split>]`` (split defaults to train).

    ``organism:attacker:<split>`` gives attacker instructions for GRPO attacker training
    (:mod:`opct.attack.attacker_data`).
    """
    from opct.pairs import PairProblem, pair_from_record

    parts = source.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"data.train {source!r}: expected organism:<axis>[:<split>], e.g. organism:sycophancy:train")
    axis, split = parts[1], parts[2] if len(parts) == 3 else "train"
    if axis == "attacker":
        from opct.attack.attacker_data import organism_attacker_pairs

        return organism_attacker_pairs(split)
    from opct.organism.pairs import build_pairs

    problems: list[PairProblem] = []
    pairs = [pair_from_record(r, (source, i + 1), problems) for i, r in enumerate(build_pairs(axis, split))]
    if problems:
        raise ValueError(f"built-in pairs {source} are invalid: {problems[0]}")
    return [p for p in pairs if p is not None]


def total_steps(cfg: RunConfig, n_pairs: int) -> int:
    if cfg.train.max_steps is not None:
        return cfg.train.max_steps
    return max(1, math.ceil(cfg.train.epochs * n_pairs / cfg.train.batch_size))


def step_indices(step: int, n_pairs: int, batch_size: int, seed: int, shuffle: bool) -> list[int]:
    """Pair indices of a step's global batch: epochs are consecutive seeded permutations."""
    out = []
    for pos in range(step * batch_size, (step + 1) * batch_size):
        epoch, offset = divmod(pos, n_pairs)
        if shuffle:
            order = torch.randperm(n_pairs, generator=torch.Generator().manual_seed(seed * 7919 + epoch))
            out.append(int(order[offset]))
        else:
            out.append(offset)
    return out


def seed_step(seed: int, step: int, rank: int) -> None:
    """Seed every global generator from (seed, step, rank), so a resumed step replays exactly."""
    s = (seed * 1_000_003 + step * 10_007 + rank) % (2**31)
    random.seed(s)
    np.random.seed(s)
    torch.manual_seed(s)


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    root = run_dir / "checkpoints"
    if not root.exists():
        return []
    found = []
    for d in root.iterdir():
        if d.is_dir() and d.name.startswith("step-") and d.name[5:].isdigit():
            found.append((int(d.name[5:]), d))
    return sorted(found)


def _truncate_jsonl(path: Path, last_step: int, gz: bool = False) -> None:
    """Drop log lines written after the checkpoint a run resumes from."""
    if not path.exists():
        return
    opener = gzip.open if gz else open
    with opener(path, "rt", encoding="utf-8") as fh:
        keep = [line for line in fh if line.strip() and json.loads(line).get("step", 0) <= last_step]
    tmp = path.with_name(path.name + ".tmp")
    with opener(tmp, "wt", encoding="utf-8") as fh:
        fh.writelines(keep)
    tmp.replace(path)


def _check_resumable(run_dir: Path, cfg: RunConfig, teacher_fingerprint: str, data_hash: str) -> None:
    old = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    before, now = _flatten(old["config"]), _flatten(dump_config(cfg))
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k) and k not in RESUMABLE_CHANGES)
    if changed:
        raise RunDirError(
            f"{run_dir} holds a run with a different configuration ({', '.join(changed)}). "
            "Use another train name/output_dir, or delete the directory to start over."
        )
    if old.get("teacher_fingerprint") != teacher_fingerprint:
        raise RunDirError(
            f"refusing to resume {run_dir}: the teacher's weights changed "
            f"(fingerprint {old.get('teacher_fingerprint')} at the start, {teacher_fingerprint} now). "
            "OPCT's teacher is the run-start model and must not change during a run."
        )
    if old.get("data_hash") != data_hash:
        raise RunDirError(f"refusing to resume {run_dir}: the training pairs changed since the run started.")


def _save_trainable_only(models: list[torch.nn.Module], weights: list[dict[str, Any]], output_dir: str) -> None:
    """accelerate save hook: keep only trainable tensors (the adapter under LoRA)."""
    for model, state in zip(models, weights, strict=False):
        trainable = {name for name, p in model.named_parameters() if p.requires_grad}
        for key in list(state):
            if key not in trainable:
                del state[key]


def _has_accelerator_device() -> bool:
    xpu = getattr(torch, "xpu", None)
    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or bool(xpu and xpu.is_available()) or bool(mps and mps.is_available())


def _make_accelerator(cfg: RunConfig, run_dir: Path) -> Accelerator:
    from accelerate.utils import ProjectConfiguration

    kwargs: dict[str, Any] = {}
    if cfg.train.trackers:
        kwargs["log_with"] = list(cfg.train.trackers)
    return Accelerator(
        cpu=not _has_accelerator_device(),
        mixed_precision=cfg.train.mixed_precision,
        project_config=ProjectConfiguration(project_dir=str(run_dir), logging_dir=str(run_dir / "trackers")),
        **kwargs,
    )


def _save_checkpoint(acc: Accelerator, run_dir: Path, step: int, keep: int) -> None:
    root = run_dir / "checkpoints"
    final, tmp = root / f"step-{step}", root / f"step-{step}.tmp"
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    acc.wait_for_everyone()
    acc.save_state(str(tmp))
    acc.wait_for_everyone()
    if acc.is_main_process:
        write_json_atomic(tmp / "trainer_state.json", {"step": step})
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for _, old in list_checkpoints(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    acc.wait_for_everyone()


def _save_final(acc: Accelerator, model: torch.nn.Module, tokenizer: Any, cfg: RunConfig, run_dir: Path) -> Path:
    final, tmp = run_dir / "final", run_dir / "final.tmp"
    acc.wait_for_everyone()
    state = acc.get_state_dict(model)
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        unwrapped = acc.unwrap_model(model)
        unwrapped.save_pretrained(tmp, state_dict=state)
        tokenizer.save_pretrained(tmp)
        write_json_atomic(
            tmp / "opct_checkpoint.json",
            {"base_model": cfg.model.name_or_path, "revision": cfg.model.revision, "finetune": cfg.finetune, "method": cfg.method},
        )
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    acc.wait_for_everyone()
    return final


class _MetricsWriter:
    def __init__(self, run_dir: Path, enabled: bool, log_rollouts: bool):
        self.enabled = enabled
        self.metrics = run_dir / "metrics.jsonl"
        self.rollouts = run_dir / "rollouts.jsonl.gz" if log_rollouts else None

    def write(self, record: dict[str, Any], rollouts: list[dict[str, Any]]) -> None:
        if not self.enabled:
            return
        with self.metrics.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.rollouts is not None and rollouts:
            with gzip.open(self.rollouts, "at", encoding="utf-8") as fh:
                for r in rollouts:
                    fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def train(cfg: RunConfig, show_progress: bool = True) -> TrainResult:
    """Run (or resume) the training run described by ``cfg``; returns where its outputs are."""
    pairs = load_training_pairs(cfg)
    run_dir = cfg.run_dir
    acc = _make_accelerator(cfg, run_dir)
    if cfg.train.batch_size % acc.num_processes:
        raise ValueError(
            f"train.batch_size={cfg.train.batch_size} must be divisible by the number of processes ({acc.num_processes})"
        )
    data_hash = hash_records([p.to_dict() for p in pairs])
    seed_step(cfg.seed, 0, 0)

    tokenizer = load_tokenizer(
        cfg.model.name_or_path, cfg.model.chat_template, cfg.model.revision, cfg.model.trust_remote_code
    )
    model = load_model(cfg.model)
    if cfg.finetune == "lora":
        model = add_lora(model, cfg.lora)
    teacher = make_teacher(model)
    if not teacher.shares_weights:
        teacher.model.to(acc.device)

    resume_from: tuple[int, Path] | None = None
    if (run_dir / "manifest.json").exists():
        _check_resumable(run_dir, cfg, teacher.fingerprint, data_hash)
        found = list_checkpoints(run_dir)
        resume_from = found[-1] if found else None
    acc.wait_for_everyone()
    if acc.is_main_process:
        run_dir.mkdir(parents=True, exist_ok=True)
        if resume_from is None:
            for stale in ("metrics.jsonl", "rollouts.jsonl.gz"):
                (run_dir / stale).unlink(missing_ok=True)
        write_json_atomic(
            run_dir / "manifest.json",
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
                num_processes=acc.num_processes,
                mixed_precision=cfg.train.mixed_precision,
            ),
        )

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params, lr=cfg.optim.lr, betas=cfg.optim.betas, eps=cfg.optim.eps, weight_decay=cfg.optim.weight_decay
    )
    steps = total_steps(cfg, len(pairs))
    schedule = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}[cfg.optim.schedule]
    scheduler = get_scheduler(schedule, optimizer, num_warmup_steps=cfg.optim.warmup_steps, num_training_steps=steps)
    prepared, optimizer = acc.prepare(model, optimizer)
    state = TrainerState()
    acc.register_for_checkpointing(state, scheduler)
    acc.register_save_state_pre_hook(_save_trainable_only)

    ctx = TrainContext(
        cfg=cfg,
        accelerator=acc,
        model=prepared,
        policy=acc.unwrap_model(prepared),
        tokenizer=tokenizer,
        teacher=teacher,
        run_dir=run_dir,
    )
    method = METHODS[cfg.method](ctx)
    method.setup(pairs)

    if resume_from is not None:
        acc.load_state(str(resume_from[1]), strict=False)
        if acc.is_main_process:
            _truncate_jsonl(run_dir / "metrics.jsonl", state.step)
            _truncate_jsonl(run_dir / "rollouts.jsonl.gz", state.step, gz=True)
    if cfg.train.trackers:
        acc.init_trackers(cfg.name, config=_flatten(dump_config(cfg)))

    writer = _MetricsWriter(run_dir, acc.is_main_process, cfg.train.log_rollouts)
    progress = _progress(show_progress and acc.is_main_process)
    with progress as bar:
        task = bar.add_task(f"{cfg.method} {cfg.name}", total=steps, completed=state.step, loss=0.0, kl=0.0) if bar else None
        while state.step < steps:
            step = state.step
            record, rollouts = _train_step(ctx, method, optimizer, scheduler, pairs, step, steps)
            state.step = step + 1
            writer.write(record, rollouts)
            if cfg.train.trackers:
                acc.log({k: v for k, v in record.items() if isinstance(v, int | float)}, step=step + 1)
            if state.step % cfg.train.checkpoint_every == 0 or state.step == steps:
                _save_checkpoint(acc, run_dir, state.step, cfg.train.keep_checkpoints)
            if bar is not None:
                bar.update(task, completed=state.step, loss=record["loss"], kl=record.get("kl_to_teacher", 0.0))
    final = _save_final(acc, prepared, tokenizer, cfg, run_dir)
    if cfg.train.trackers:
        acc.end_training()
    return TrainResult(run_dir=run_dir, steps=steps, final_dir=final, is_main_process=acc.is_main_process)


def _train_step(ctx: TrainContext, method: Any, optimizer, scheduler, pairs, step: int, steps: int):
    cfg, acc = ctx.cfg, ctx.accelerator
    t0 = time.perf_counter()
    seed_step(cfg.seed, step, acc.process_index)
    indices = step_indices(step, len(pairs), cfg.train.batch_size, cfg.seed, cfg.data.shuffle)
    mine = [pairs[i] for i in indices[acc.process_index :: acc.num_processes]]
    micro = method.prepare(mine, step)
    t_prepare = time.perf_counter() - t0
    local_tokens = sum(mb.num_tokens for mb in micro)
    global_tokens = acc.reduce(torch.tensor(float(local_tokens), device=acc.device), reduction="sum").item()
    scale = acc.num_processes / max(global_tokens, 1.0)
    ctx.model.train()
    totals: dict[str, float] = {"loss_sum": 0.0}
    for i, mb in enumerate(micro):
        sync = nullcontext() if i == len(micro) - 1 else acc.no_sync(ctx.model)
        with sync:
            loss_sum, stats = method.loss(mb)
            acc.backward(loss_sum * scale)
        totals["loss_sum"] += loss_sum.item()
        for k, v in stats.items():
            totals[k] = totals.get(k, 0.0) + v
    grad_norm = None
    if cfg.optim.max_grad_norm is not None:
        grad_norm = acc.clip_grad_norm_(ctx.model.parameters(), cfg.optim.max_grad_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)

    keys = sorted(totals)
    summed = acc.reduce(torch.tensor([totals[k] for k in keys], device=acc.device, dtype=torch.float64), "sum")
    g = dict(zip(keys, summed.tolist(), strict=True))
    elapsed = time.perf_counter() - t0
    record: dict[str, Any] = {
        "step": step + 1,
        "epoch": round((step + 1) * cfg.train.batch_size / len(pairs), 4),
        "loss": g["loss_sum"] / max(global_tokens, 1.0),
        "completion_tokens": int(global_tokens),
        "completion_len": global_tokens / max(g.get("sequences", 1.0), 1.0),
        "truncation_rate": g.get("truncated", 0.0) / max(g.get("sequences", 1.0), 1.0),
        "tokens_per_s": global_tokens / elapsed,
        "lr": scheduler.get_last_lr()[0],
        "step_time_s": elapsed,
        "prepare_time_s": t_prepare,
    }
    if "kl_sum" in g:
        record["kl_to_teacher"] = g["kl_sum"] / max(global_tokens, 1.0)
        record["ratio_abs_log_dev"] = g["ratio_dev_sum"] / max(global_tokens, 1.0)
    for key, value in g.items():
        if key.startswith("mean:"):
            record[key[5:]] = value / max(g.get("sequences", 1.0), 1.0)
    if grad_norm is not None:
        record["grad_norm"] = float(grad_norm)
    rollouts: list[dict[str, Any]] = []
    if cfg.train.log_rollouts and cfg.method in ("opct", "grpo_attack"):
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


class _NoProgress:
    def __enter__(self):
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(enabled: bool):
    if not enabled:
        return _NoProgress()
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}  kl {task.fields[kl]:.4f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )


__all__ = ["RunDirError", "TrainResult", "is_peft", "train"]
