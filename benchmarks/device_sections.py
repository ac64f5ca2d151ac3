r"""The measurements of the device check (``benchmarks/device_check.py``), one section per process.

Usage (what ``device_check.py`` runs; each call writes one JSON object to ``--result``)::

    python benchmarks/device_sections.py SECTION --work DIR --result FILE.json --tokenizer DIR [--smoke]

Sections
--------
* ``env``: Python, torch, CUDA, the GPU, the versions of opct's dependencies, whether vLLM imports and
  whether opct itself imports; every missing piece as one line;
* ``engines``: ``benchmarks/engines.py`` on a random Qwen3-0.6B-shaped model in bf16: ``opct-hf``
  (:class:`~opct.sampling.hf_sampler.HFSampler`), transformers' ``generate`` and, where vLLM imports,
  ``vllm``; tokens/s and |recorded log-prob - one forward pass's| per token;
* ``lora`` and ``full``: opct's own training loop (``opct.training.loop.train``, engine ``hf``) on a
  random Qwen3-1.7B-shaped model in bf16 (``mixed_precision: bf16``), LoRA r=32 or full fine-tuning:
  median step time after the first step, the peak GPU memory, and step 1's |loss - KL| and
  |log ratio| (0 when sampler and learner agree: the first step is exactly on-policy);
* ``resume``: ``opct train`` (the CLI, in its own process) on the tokenizer's 2-layer model (bf16 on a
  GPU) for 10 steps, then again with ``train.max_steps: 20``, which resumes from the step-10 checkpoint;
  engine ``vllm`` where vLLM imports, else ``hf``. Checks steps 1..20 are each logged once and
  ``final/`` exists;
* ``fsdp``: ``accelerate launch`` with an FSDP2 config and one process, full fine-tuning of the 0.6B
  shape for 3 steps: that it trains sharded (accelerate's distributed type is FSDP) and its peak memory.

The processes a section starts (``opct train``, ``accelerate launch``) write into the section's log line
by line as they run (``device_logs.run_logged``), so a crash's traceback and a timeout's last step are
kept; a failure raises with the child's first error (``device_logs.first_error``).

``--smoke`` runs every section on the tokenizer folder's 2-layer ``tiny_config.json`` in float32 on
whatever device there is (the CPU here), so the whole script can be checked without a GPU.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from device_logs import run_logged  # beside this file
from engines import WORDS  # benchmarks/engines.py, beside this file

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PACKAGES = ("torch", "transformers", "peft", "accelerate", "pydantic", "safetensors", "tokenizers", "vllm")
#: Qwen3-1.7B's shape (its config.json): 28 layers, d=2048, tied 151,936-token embeddings, 1.72B parameters.
QWEN3_17B = dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, max_position_embeddings=40960)
QWEN3_06B = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, max_position_embeddings=40960)


def package_versions() -> dict[str, str | None]:
    """The installed version of each package in :data:`PACKAGES` (None: not installed)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def section_env(args: argparse.Namespace) -> dict[str, Any]:
    """What this machine has: torch and CUDA, the GPU, the packages, and whether opct imports."""
    import platform

    import torch

    cuda = torch.cuda.is_available()
    metrics: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                               "torch_cuda": torch.version.cuda, "cuda": cuda, "packages": package_versions(),
                               "cpu_count": os.cpu_count()}
    missing = []
    if cuda:
        props = torch.cuda.get_device_properties(0)
        metrics["gpu"] = {"name": props.name, "count": torch.cuda.device_count(),
                          "memory_gib": round(props.total_memory / 2**30, 1),
                          "capability": f"{props.major}.{props.minor}", "bf16": torch.cuda.is_bf16_supported()}
    else:
        missing.append(f"CUDA: not available (torch {torch.__version__}, built for CUDA {torch.version.cuda}): "
                       "the GPU measurements are skipped (--smoke runs them on a tiny model here)")
    try:
        import vllm  # noqa: F401

        metrics["vllm"] = True
    except Exception as err:  # not installed, or installed but broken: either way no vLLM engine
        metrics["vllm"] = False
        why = ("not installed" if isinstance(err, ModuleNotFoundError)
               else f"does not import ({type(err).__name__}: {' '.join(str(err).split())})")
        missing.append(f"vLLM: {why}: vLLM rollouts and their log-probs are not measured; the 20-step run uses "
                       "the HF engine (pip install 'opct[vllm]')")
    try:
        import opct.training.loop  # noqa: F401

        metrics["opct"] = True
    except Exception as err:
        metrics["opct"] = False
        why = " ".join(str(err).split())  # one line
        missing.append(f"opct: does not import ({type(err).__name__}: {why}): put the missing wheels in .whl/ "
                       "(docs/development.md, 'The device check')")
    return {"status": "ok", "metrics": metrics, "missing": missing}


# ----------------------------------------------------------------------------------------------
# models and pairs


def build_model(work: Path, size: str, dtype: str, tokenizer_dir: Path, device: str) -> Path:
    """A random Qwen3-family model of ``size`` (``1.7b``, ``0.6b``, ``tiny``) saved with the real tokenizer
    (built once per work folder: a later section reuses it)."""
    folder = work / f"qwen3-{size}-{dtype}"
    if (folder / "config.json").exists() and any(folder.glob("*.safetensors")):
        return folder
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = json.loads((tokenizer_dir / "tiny_config.json").read_text())
    shape = {"1.7b": QWEN3_17B, "0.6b": QWEN3_06B, "tiny": {}}[size]
    if shape:
        config.update(shape, layer_types=["full_attention"] * shape["num_hidden_layers"])
    torch.manual_seed(0)
    with torch.device(device):  # random init where the model will run (seconds on a GPU)
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=getattr(torch, dtype))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(folder)
    del model
    return folder


def write_pairs(path: Path, count: int, words: int, seed: int = 0) -> Path:
    """``count`` consistency pairs: a question of ``words`` random words, the student's with a cue."""
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(count):
        question = " ".join(rng.choice(WORDS) for _ in range(words)) + "?"
        rows.append({"id": f"d{i}", "axis": "sycophancy", "teacher_prompt": question,
                     "prompt": [{"role": "user", "content": f"{question} I am sure the answer is {rng.choice(WORDS)}."}],
                     "meta": {"split": "train"}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_config(model: Path, pairs: Path, out: Path, name: str, args: argparse.Namespace, **train: Any) -> dict[str, Any]:
    """An OPCT run configuration for the check: fixed-length completions, so every step does the same work."""
    finetune = train.pop("finetune", "lora")
    engine = train.pop("engine", "hf")
    sampling = {"n": args.n, "temperature": 1.0, "max_new_tokens": args.new_tokens,
                "min_new_tokens": args.new_tokens, "engine": engine}
    pairs_per_step = train.pop("pairs_per_step", args.pairs_per_step)
    return {"name": name, "output_dir": str(out), "method": "opct", "seed": 0, "finetune": finetune,
            "model": {"name_or_path": str(model), "dtype": args.dtype},
            "lora": {"r": 32, "alpha": 32}, "data": {"train": [str(pairs)]},
            "opct": {"sampling": sampling}, "optim": {"lr": 1e-5},
            "train": {"pairs_per_step": pairs_per_step, "sequences_per_microbatch": pairs_per_step * args.n,
                      "mixed_precision": args.mixed_precision, "log_rollouts": False, **train}}


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of a run's ``metrics.jsonl``."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def step_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median step time after the first (warm-up) step, and step 1's on-policy check."""
    timed = rows[1:] or rows
    step_s = statistics.median(r["step_time_s"] for r in timed)
    first = rows[0]
    return {"steps": len(rows), "median_step_s": step_s, "steps_per_s": 1.0 / step_s,
            "median_prepare_s": statistics.median(r["prepare_time_s"] for r in timed),
            "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed),
            "completion_tokens_per_step": first["completion_tokens"],
            "step1_loss": first["loss"], "step1_kl": first.get("kl_to_teacher"),
            "step1_abs_loss_minus_kl": abs(first["loss"] - first["kl_to_teacher"]) if "kl_to_teacher" in first else None,
            "step1_ratio_abs_log_dev": first.get("ratio_abs_log_dev"),
            "max_ratio_abs_log_dev": max(r.get("ratio_abs_log_dev", 0.0) for r in rows),
            "finite": all(map(_finite, (r["loss"] for r in rows)))}


def _finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")


def _peak_memory() -> dict[str, float]:
    import torch

    if not torch.cuda.is_available():
        import resource

        return {"peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
    return {"peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
            "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30}


# ----------------------------------------------------------------------------------------------
# the sections


def section_engines(args: argparse.Namespace) -> dict[str, Any]:
    """``benchmarks/engines.py``: opct-hf, hf-generate and (where it imports) vLLM."""
    import engines

    names = ["opct-hf", "hf-generate"] + (["vllm"] if args.vllm else [])
    size = "tiny" if args.smoke else "0.6b"
    argv = ["--engines", ",".join(names), "--size", size, "--device", args.device, "--dtype", args.dtype,
            "--prompts", str(8 if args.smoke else 32), "--n", "4", "--prompt-len", "64",
            "--max-new-tokens", str(16 if args.smoke else 128), "--tokenizer", str(args.tokenizer),
            "--work", str(args.work / "engines"), "--out", str(args.work / "engines")]
    result = engines.main(argv)
    return {"status": "ok", "metrics": {"size": size, "parameters": result["parameters"], "engines": result["engines"],
                                        "settings": {k: result["settings"][k] for k in ("prompts", "n", "max_new_tokens")}}}


def section_finetune(args: argparse.Namespace, finetune: str) -> dict[str, Any]:
    """opct's training loop for a few steps on the 1.7B shape: step time, memory, step 1 on-policy."""
    import torch

    from opct.config import RunConfig
    from opct.training.loop import train

    size = "tiny" if args.smoke else "1.7b"
    model = build_model(args.work, size, args.dtype, args.tokenizer, args.device)
    pairs = write_pairs(args.work / "pairs.jsonl", 64, 24)
    cfg = RunConfig.model_validate(run_config(model, pairs, args.work / "runs", f"{finetune}-{size}", args,
                                              finetune=finetune, max_steps=args.steps, checkpoint_every=1000))
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    train(cfg, show_progress=False)
    wall = time.perf_counter() - start
    rows = read_metrics(cfg.run_dir)
    params = json.loads((model / "config.json").read_text())
    return {"status": "ok", "metrics": {"size": size, "finetune": finetune, "hidden_size": params["hidden_size"],
                                        "layers": params["num_hidden_layers"], "wall_s": wall, **step_summary(rows),
                                        **_peak_memory()}}


def _child_env() -> dict[str, str]:
    """This environment, unbuffered: a child's lines reach the section's log as they are printed."""
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _opct_cli(config: Path, what: str) -> str:
    cmd = [sys.executable, "-m", "opct.cli", "train", "--no-progress", "-c", str(config)]
    return run_logged(cmd, what, REPO, _child_env())


def section_resume(args: argparse.Namespace) -> dict[str, Any]:
    """A 20-step OPCT run, stopped after step 10 and resumed in a new process (``opct train`` twice).

    On the tiny model, on a GPU too: what is checked is the resume, not the speed (the 0.6B shape took
    more than 150 s on an H100 for 20 HF-engine steps and two process starts, 2026-11-28).
    """
    import yaml

    size = "tiny"
    engine = "vllm" if args.vllm else "hf"
    model = build_model(args.work, size, args.dtype, args.tokenizer, args.device)
    pairs = write_pairs(args.work / "pairs.jsonl", 64, 24)
    cfg = run_config(model, pairs, args.work / "runs", f"resume-{size}-{engine}", args, engine=engine,
                     pairs_per_step=4, max_steps=10, checkpoint_every=5)
    times = []
    for part, steps in enumerate((10, 20)):
        cfg["train"]["max_steps"] = steps
        path = args.work / f"resume-{part}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        start = time.perf_counter()
        _opct_cli(path, f"opct train (part {part + 1}, to step {steps})")
        times.append(time.perf_counter() - start)
        if part == 0:
            first_rows = len(read_metrics(Path(cfg["output_dir"]) / cfg["name"]))
    run_dir = Path(cfg["output_dir"]) / cfg["name"]
    rows = read_metrics(run_dir)
    steps = [r["step"] for r in rows]
    ok = steps == list(range(1, 21)) and first_rows == 10 and (run_dir / "final").is_dir()
    return {"status": "ok" if ok else "failed",
            "note": "" if ok else f"logged steps {steps} (after the first part: {first_rows}); final/ present: "
                                  f"{(run_dir / 'final').is_dir()}",
            "metrics": {"size": size, "engine": engine, "wall_s": times, "logged_steps": len(steps),
                        "steps_in_order": steps == list(range(1, 21)), "resumed_after_step": first_rows,
                        **step_summary(rows)}}


ACCELERATE_FSDP = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "num_machines": 1,
                   "num_processes": 1, "machine_rank": 0,
                   "fsdp_config": {"fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                                   "fsdp_reshard_after_forward": True, "fsdp_cpu_ram_efficient_loading": False,
                                   "fsdp_state_dict_type": "FULL_STATE_DICT"}}


def section_fsdp(args: argparse.Namespace) -> dict[str, Any]:
    """``accelerate launch`` with FSDP2 and one process: full fine-tuning for 3 steps, sharded."""
    import socket

    import yaml

    size = "tiny" if args.smoke else "0.6b"
    model = build_model(args.work, size, args.dtype, args.tokenizer, args.device)
    pairs = write_pairs(args.work / "pairs.jsonl", 64, 24)
    cfg = run_config(model, pairs, args.work / "runs", f"fsdp-{size}", args, finetune="full", max_steps=3,
                     checkpoint_every=1000)
    config = args.work / "fsdp.yaml"
    config.write_text(yaml.safe_dump(cfg))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    accelerate_cfg = args.work / "accelerate_fsdp.yaml"
    accelerate_cfg.write_text(yaml.safe_dump({**ACCELERATE_FSDP, "main_process_port": port,
                                              "mixed_precision": args.mixed_precision}))
    worker = args.work / "fsdp-worker.json"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_cfg), str(Path(__file__)),
           "fsdp-worker", "--config", str(config), "--result", str(worker), "--work", str(args.work),
           "--tokenizer", str(args.tokenizer)]
    start = time.perf_counter()
    run_logged(cmd, "accelerate launch (FSDP2, one process)", REPO, _child_env())
    found = json.loads(worker.read_text())
    rows = read_metrics(Path(cfg["output_dir"]) / cfg["name"])
    sharded = found["distributed_type"] == "FSDP"
    return {"status": "ok" if sharded or args.smoke else "failed",
            "note": "" if sharded else f"trained without FSDP (accelerate's distributed type {found['distributed_type']})",
            "metrics": {"size": size, "wall_s": time.perf_counter() - start, "sharded": sharded, **found,
                        **step_summary(rows)}}


def fsdp_worker(args: argparse.Namespace) -> None:
    """Inside ``accelerate launch``: train, then record accelerate's distributed type and the peak memory."""
    import yaml
    from accelerate import PartialState

    from opct.config import RunConfig
    from opct.training.loop import train

    cfg = RunConfig.model_validate(yaml.safe_load(Path(args.config).read_text()))
    train(cfg, show_progress=False)
    state = PartialState()
    if state.is_main_process:
        Path(args.result).write_text(json.dumps({"distributed_type": state.distributed_type.value,
                                                 "processes": state.num_processes, **_peak_memory()}))


SECTIONS = {"env": section_env, "engines": section_engines, "lora": lambda a: section_finetune(a, "lora"),
            "full": lambda a: section_finetune(a, "full"), "resume": section_resume, "fsdp": section_fsdp}


def main(argv: list[str] | None = None) -> None:
    """Run one section and write its result (``status``, ``metrics``, ``missing``, ``note``) as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("section", choices=[*SECTIONS, "fsdp-worker"])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--result", type=Path, required=True)
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--config", default=None, help="fsdp-worker: the run configuration")
    ap.add_argument("--smoke", action="store_true", help="the tiny model in float32, on any device")
    ap.add_argument("--vllm", action="store_true", help="vLLM imports (the env section found it)")
    ap.add_argument("--steps", type=int, default=6, help="lora/full: training steps (the first is not timed)")
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--pairs-per-step", type=int, default=8)
    args = ap.parse_args(argv)
    if args.section == "fsdp-worker":
        fsdp_worker(args)
        return
    import torch

    args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.dtype, args.mixed_precision = ("float32", "no") if args.smoke else ("bfloat16", "bf16")
    if args.smoke:
        args.new_tokens, args.pairs_per_step, args.n = min(args.new_tokens, 8), min(args.pairs_per_step, 4), 2
    args.work.mkdir(parents=True, exist_ok=True)
    result = SECTIONS[args.section](args)
    args.result.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
