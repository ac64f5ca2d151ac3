r"""The measurements of the device check (``benchmarks/device_check.py``), one section per process.

Usage (what ``device_check.py`` runs; each call writes one JSON object to ``--result``)::

    python benchmarks/device_sections.py SECTION --work DIR --result FILE.json --tokenizer DIR [--smoke]

Sections
--------
* ``env``: Python, torch, CUDA, the GPU, the versions of opct's dependencies, whether vLLM imports and
  whether opct itself imports; every missing piece as one line;
* ``probe``: the static decoder under bfloat16 autocast on float32 weights (an unmerged LoRA adapter, and full
  fine-tuning), the weights changed in place between two calls: each call keeps the decoder rule against
  the trainer's forward of the live weights (``benchmarks/device_probe.py``);
* ``decode``: ``benchmarks/engines.py`` on a random Qwen3-0.6B-shaped model in bf16, 128 rows (32 prompts x
  n=4) x 128 tokens: opct's plain and fast decoders (``opct-plain``, ``opct-fast``), transformers'
  ``generate`` and, where vLLM imports, ``vllm``; tokens/s and |recorded log-prob - the trainer's forward|
  per token (:func:`decode_engines` says which engines this checkout's ``engines.py`` has);
* ``lora``, ``full`` and ``memory``: opct's training loop on the 1.7B shape (LoRA, full fine-tuning) and a
  4B-shape LoRA run with gradient checkpointing and 1,024-token completions beside the dry run's memory
  estimate (``benchmarks/device_training.py``);
* ``fsdp``: FSDP2 through ``accelerate launch`` with ``configs/accelerate/fsdp2.yaml`` and one process, a
  checkpoint and a bit-exact resume, every worker's own error kept (``benchmarks/device_fsdp.py``).

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
import sys
from pathlib import Path
from typing import Any

from device_fsdp import ACCELERATE_FSDP2, fsdp_worker, section_fsdp  # beside this file
from device_probe import section_probe
from device_runs import step_summary  # noqa: F401  (re-exported: the check's tests read it here)
from device_training import section_finetune, section_memory

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PACKAGES = ("torch", "transformers", "peft", "accelerate", "pydantic", "safetensors", "tokenizers", "vllm")


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
        missing.append(f"vLLM: {why}: vLLM rollouts and their log-probs are not measured; the decode and training "
                       "sections measure the HF path (pip install 'opct[vllm]')")
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
# decode

#: The engines the decode section compares (``benchmarks/engines.py``): opct's plain and fast decoders and
#: transformers' ``generate``; where this checkout's engines.py predates the fast decoder, its ``opct-hf``.
DECODE_ENGINES = ("opct-plain", "opct-fast", "hf-generate")
LEGACY_ENGINES = ("opct-hf", "hf-generate")


def decode_engines(engines_source: str, vllm: bool) -> tuple[list[str], str]:
    """The engines to run, and a note when the fast decoder's engines are not in ``engines_source``."""
    if all(f'"{name}"' in engines_source for name in DECODE_ENGINES):
        names, note = list(DECODE_ENGINES), ""
    else:
        names, note = list(LEGACY_ENGINES), ("benchmarks/engines.py has no opct-plain/opct-fast engines here (the "
                                             "fast decoder is not in this checkout): measured opct-hf")
    return names + (["vllm"] if vllm else []), note


def decode_argv(args: argparse.Namespace, names: list[str]) -> list[str]:
    """``benchmarks/engines.py``'s arguments: the 0.6B shape, 32 prompts x n=4 = 128 rows x 128 tokens in the
    check's dtype (bf16 on a GPU); under ``--smoke`` the tiny model, 8 prompts x 16 tokens."""
    return ["--engines", ",".join(names), "--size", "tiny" if args.smoke else "0.6b", "--device", args.device,
            "--dtype", args.dtype, "--prompts", str(8 if args.smoke else 32), "--n", "4", "--prompt-len", "64",
            "--max-new-tokens", str(16 if args.smoke else 128), "--tokenizer", str(args.tokenizer),
            "--work", str(args.work / "engines"), "--out", str(args.work / "engines")]


def section_decode(args: argparse.Namespace) -> dict[str, Any]:
    """``benchmarks/engines.py`` on the 0.6B shape in bf16, 128 rows (32 prompts x n=4) x 128 tokens:
    tokens/s of each engine and |recorded log-prob - the trainer's forward| per token."""
    import engines

    names, note = decode_engines(Path(engines.__file__).read_text(), args.vllm)
    size = "tiny" if args.smoke else "0.6b"
    result = engines.main(decode_argv(args, names))
    settings = {k: result["settings"][k] for k in ("prompts", "n", "max_new_tokens")}
    return {"status": "ok", "note": note,
            "metrics": {"size": size, "dtype": args.dtype, "parameters": result["parameters"],
                        "engines": result["engines"], "settings": settings,
                        "rows": settings["prompts"] * settings["n"], "vllm": args.vllm}}


SECTIONS = {"env": section_env, "probe": section_probe, "decode": section_decode, "lora": lambda a: section_finetune(a, "lora"),
            "full": lambda a: section_finetune(a, "full"), "memory": section_memory, "fsdp": section_fsdp}


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
    ap.add_argument("--steps", type=int, default=5, help="lora/full: training steps (the first is not timed)")
    ap.add_argument("--accelerate-config", default=str(ACCELERATE_FSDP2), help="fsdp: the accelerate config launched "
                    "(num_processes, port and mixed precision are set by the check)")
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--pairs-per-step", type=int, default=8)
    args = ap.parse_args(argv)
    if args.section == "fsdp-worker":
        from torch.distributed.elastic.multiprocessing.errors import (
            record,  # torch: imported only in the worker
        )

        record(fsdp_worker)(args)  # the worker's own exception and traceback into TORCHELASTIC_ERROR_FILE
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
