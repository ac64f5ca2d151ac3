"""``opct --version`` and ``opct env``: what a bug report needs to say about the installation.

``opct env`` prints the versions of Python, opct and the libraries opct runs on, the devices torch
sees (CUDA and its devices, MPS, CPU cores and threads) and the environment variables that change
what opct does (Hugging Face's cache and offline switches, thread counts, every ``OPCT_*``); a
variable that holds a secret is shown as set, never with its value.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from typing import Annotated, Any

import typer

from opct import __version__
from opct.errors import redact_secrets

#: The libraries whose versions a bug report needs, in the order shown.
PACKAGES = ("torch", "transformers", "peft", "accelerate", "datasets", "safetensors", "tokenizers")

#: Environment variables that change what opct or the libraries under it do (besides every OPCT_*).
ENV_VARS = ("HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
            "HF_ENDPOINT", "HF_TOKEN", "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS",
            "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM", "ACCELERATE_USE_CPU")

_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def opct_version() -> str:
    """The installed package's version (its metadata), or the source tree's when it is not installed."""
    try:
        return metadata.version("opct")
    except metadata.PackageNotFoundError:
        return __version__


def version_callback(value: bool) -> None:
    """``opct --version``: print ``opct <version>`` and exit 0."""
    if value:
        typer.echo(f"opct {opct_version()}")
        raise typer.Exit(0)


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _shown(name: str, value: str) -> str:
    """The value of an environment variable as a report may show it (secrets only as set, a URL's password as ``***``)."""
    return "(set, hidden)" if any(w in name.upper() for w in _SECRET_WORDS) else redact_secrets(value)


def _devices() -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None)
    return {
        "cuda_available": cuda,
        "cuda_version": torch.version.cuda,
        "cuda_device_count": torch.cuda.device_count() if cuda else 0,
        "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
        "mps_available": bool(mps is not None and mps.is_available()),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
    }


def environment() -> dict[str, Any]:
    """Everything ``opct env`` reports, as plain data."""
    names = sorted({*ENV_VARS, *(k for k in os.environ if k.startswith("OPCT_"))})
    return {
        "opct": opct_version(),
        "python": f"{platform.python_version()} ({platform.python_implementation()}, {sys.executable})",
        "platform": platform.platform(),
        "packages": {name: _package_version(name) for name in PACKAGES},
        "devices": _devices(),
        "env": {name: _shown(name, os.environ[name]) for name in names if name in os.environ},
    }


def format_environment(info: dict[str, Any]) -> str:
    """``opct env``'s plain text: one ``name: value`` line each, ready to paste into a bug report."""
    d = info["devices"]
    cuda = (f"yes, CUDA {d['cuda_version']}, {d['cuda_device_count']} device(s): {', '.join(d['cuda_devices'])}"
            if d["cuda_available"] else "no")
    rows = [("opct", info["opct"]), ("python", info["python"]), ("platform", info["platform"])]
    rows += [(name, version or "not installed") for name, version in info["packages"].items()]
    rows += [("cuda", cuda), ("mps", "yes" if d["mps_available"] else "no"),
             ("cpu", f"{d['cpu_count']} cores; torch uses {d['torch_threads']} threads "
                     f"({d['torch_interop_threads']} inter-op)")]
    rows += [(name, value) for name, value in info["env"].items()] or [
        ("environment", "no relevant variable set (HF_*, OPCT_*, CUDA_VISIBLE_DEVICES, *_NUM_THREADS)")]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name + ':':<{width + 1}} {value}" for name, value in rows)


def env(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Print versions (Python, opct, torch, transformers, ...), devices and the relevant environment
    variables, for a bug report."""
    info = environment()
    typer.echo(json.dumps(info, indent=2) if as_json else format_environment(info))
