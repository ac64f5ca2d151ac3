"""The bundled model organism: a tiny Llama trained on a synthetic world with exact ground truth."""

from __future__ import annotations

from pathlib import Path


def checkpoint_path() -> Path:
    """Directory of the shipped organism checkpoint (loadable with ``AutoModelForCausalLM``)."""
    return Path(__file__).resolve().parent / "checkpoint"


__all__ = ["checkpoint_path"]
