"""The device check's ``fsdp`` section: FSDP2 through ``accelerate launch`` with the shipped
``configs/accelerate/fsdp2.yaml`` (one process: NCCL with world size 1 on a GPU, gloo on the CPU), full
fine-tuning of the Qwen3-0.6B shape, a checkpoint and a bit-exact resume.

Three launches: the run to step 2 (a checkpoint at step 2), the same run resumed to step 4 in a new
process, and a second run straight to step 4. The resume is bit-exact when every tensor of the two
``final/`` folders is equal and so are the losses of steps 3 and 4.

Every worker's own error is kept, not only torch elastic's summary: the launch writes its workers' logs
and error files under ``<work>/elastic/`` (``--log_dir``, ``--tee 3``), the worker's entry point is
wrapped in torch elastic's ``@record`` (which writes the exception and its traceback to
``TORCHELASTIC_ERROR_FILE``), and a failed launch's result names each rank's error and keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

from device_logs import ChildFailed, run_logged
from device_runs import (
    REPO,
    build_model,
    child_env,
    peak_memory,
    read_metrics,
    run_config,
    step_summary,
    write_pairs,
)

ACCELERATE_FSDP2 = REPO / "configs" / "accelerate" / "fsdp2.yaml"


def worker_errors(log_dir: Path) -> list[dict[str, Any]]:
    """Each worker's error from torch elastic's error files under ``log_dir`` (``<run>/attempt_N/<rank>/error.json``):
    its rank, its message and its traceback, in rank order."""
    found = []
    for path in sorted(log_dir.rglob("error.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            found.append({"rank": path.parent.name, "message": f"unreadable error file {path}: {err}", "traceback": ""})
            continue
        message = record.get("message", {})
        if isinstance(message, dict):
            text, trace = message.get("message", ""), message.get("extraInfo", {}).get("py_callstack", "")
        else:
            text, trace = str(message), ""
        found.append({"rank": path.parent.name, "message": " ".join(str(text).split())[:500], "traceback": trace})
    return found


class WorkerFailed(RuntimeError):
    """A launch failed; ``errors`` holds each worker's own error (:func:`worker_errors`)."""

    def __init__(self, message: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.errors = errors


def _launch(args: argparse.Namespace, cfg: dict[str, Any], part: str, accelerate_cfg: Path) -> float:
    """One ``accelerate launch`` of the worker on ``cfg``; returns its seconds, raises ChildFailed with every
    worker's own error when it fails."""
    import yaml

    config = args.work / f"fsdp-{part}.yaml"
    config.write_text(yaml.safe_dump(cfg))
    log_dir = args.work / "elastic" / part
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_cfg),
           "--log_dir", str(log_dir), "--tee", "3", str(Path(__file__).with_name("device_sections.py")),
           "fsdp-worker", "--config", str(config), "--result", str(args.work / f"fsdp-worker-{part}.json"),
           "--work", str(args.work), "--tokenizer", str(args.tokenizer)]
    start = time.perf_counter()
    try:
        run_logged(cmd, f"accelerate launch (FSDP2, one process): {part}", REPO, child_env())
    except ChildFailed as failed:
        errors = worker_errors(log_dir)
        for e in errors:
            print(f"--- worker rank {e['rank']} error file: {e['message']}\n{e['traceback']}", flush=True)
        raise WorkerFailed(str(failed), errors) from None
    return time.perf_counter() - start


def _final_tensors_equal(a: Path, b: Path) -> tuple[bool, int]:
    """Whether every tensor of the two ``final/`` folders' safetensors is bit-equal, and how many there are."""
    import torch
    from safetensors.torch import load_file

    def tensors(folder: Path) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for f in sorted(folder.glob("*.safetensors")):
            out.update(load_file(f))
        return out

    ta, tb = tensors(a), tensors(b)
    same = bool(ta) and ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta)
    return same, len(ta)


def section_fsdp(args: argparse.Namespace) -> dict[str, Any]:
    """Train under FSDP2, checkpoint, resume in a new process, and compare with an uninterrupted run."""
    import yaml

    size = "tiny" if args.smoke else "0.6b"
    model = build_model(args.work, size, args.dtype, args.tokenizer, args.device)
    pairs = write_pairs(args.work / "pairs.jsonl", 64, 24)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    accelerate = yaml.safe_load(Path(args.accelerate_config).read_text())
    accelerate.update(num_processes=1, main_process_port=port, mixed_precision=args.mixed_precision)
    accelerate_cfg = args.work / "accelerate_fsdp2.yaml"
    accelerate_cfg.write_text(yaml.safe_dump(accelerate))
    # one checkpoint kept at a time: a full fine-tuning checkpoint of the 0.6B shape holds its optimizer state
    common = dict(finetune="full", new_tokens=16, n=2, pairs_per_step=2, checkpoint_every=2, keep_checkpoints=1)
    resumed = run_config(model, pairs, args.work / "runs", f"fsdp-resumed-{size}", args, max_steps=2, **common)
    straight = run_config(model, pairs, args.work / "runs", f"fsdp-straight-{size}", args, max_steps=4, **common)
    seconds = {}
    try:
        seconds["to_step_2"] = _launch(args, resumed, "to-step-2", accelerate_cfg)
        resumed["train"]["max_steps"] = 4
        seconds["resumed_to_step_4"] = _launch(args, resumed, "resumed-to-step-4", accelerate_cfg)
        seconds["straight_to_step_4"] = _launch(args, straight, "straight-to-step-4", accelerate_cfg)
    except WorkerFailed as failed:
        first = failed.errors[0]["message"] if failed.errors else str(failed)
        return {"status": "failed", "note": f"{failed} | worker error: {first}"[:600],
                "metrics": {"size": size, "seconds": seconds, "worker_errors": failed.errors}}
    run_a = Path(resumed["output_dir"]) / resumed["name"]
    run_b = Path(straight["output_dir"]) / straight["name"]
    rows_a, rows_b = read_metrics(run_a), read_metrics(run_b)
    steps = [r["step"] for r in rows_a]
    losses_equal = [r["loss"] for r in rows_a] == [r["loss"] for r in rows_b]
    tensors_equal, count = _final_tensors_equal(run_a / "final", run_b / "final")
    found = json.loads((args.work / "fsdp-worker-straight-to-step-4.json").read_text())
    for run in (run_a, run_b):
        shutil.rmtree(run, ignore_errors=True)
    sharded = found["distributed_type"] == "FSDP"
    problems = [why for ok, why in ((steps == [1, 2, 3, 4], f"resumed run logged steps {steps}"),
                                    (tensors_equal, "final/ of the resumed run differs from the uninterrupted one"),
                                    (losses_equal, "the losses of the resumed and uninterrupted runs differ"),
                                    (sharded or args.smoke, f"trained without FSDP ({found['distributed_type']})"))
                if not ok]
    return {"status": "failed" if problems else "ok", "note": "; ".join(problems),
            "metrics": {"size": size, "seconds": seconds, "sharded": sharded, **found, "steps_in_order": steps == [1, 2, 3, 4],
                        "resume_bit_exact": tensors_equal and losses_equal, "final_tensors_compared": count,
                        "losses_equal": losses_equal, **step_summary(rows_b)}}


def fsdp_worker(args: argparse.Namespace) -> None:
    """Inside ``accelerate launch``: train, then record accelerate's distributed type and the peak memory.
    Called through torch elastic's ``record``, which writes an exception to ``TORCHELASTIC_ERROR_FILE``."""
    import yaml
    from accelerate import PartialState

    from opct.config import RunConfig
    from opct.training.loop import train

    cfg = RunConfig.model_validate(yaml.safe_load(Path(args.config).read_text()))
    train(cfg, show_progress=False)
    state = PartialState()
    if state.is_main_process:
        Path(args.result).write_text(json.dumps({"distributed_type": state.distributed_type.value,
                                                 "processes": state.num_processes, **peak_memory()}))
