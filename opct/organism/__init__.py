"""The bundled model organism: a tiny causal LM trained on a synthetic world with exact ground truth.

The same world is built on three transformers families (:data:`ORGANISM_ARCHS`), each shipped in
``checkpoints/<arch>/`` and sharing one trained tokenizer and chat template.
"""

from __future__ import annotations

from pathlib import Path

#: The transformers families the organism is built on: ``LlamaForCausalLM``, ``Qwen3ForCausalLM``
#: and ``GPT2LMHeadModel``. The first is the default (the model alias ``organism``).
ORGANISM_ARCHS: tuple[str, ...] = ("llama", "qwen3", "gpt2")
DEFAULT_ARCH = ORGANISM_ARCHS[0]


def check_arch(arch: str) -> str:
    """``arch`` if it is one of :data:`ORGANISM_ARCHS`, else a ``ValueError`` naming them."""
    if arch not in ORGANISM_ARCHS:
        raise ValueError(f"unknown organism architecture {arch!r}; choose one of: {', '.join(ORGANISM_ARCHS)}")
    return arch


def checkpoint_path(arch: str = DEFAULT_ARCH) -> Path:
    """Directory of the shipped organism checkpoint of ``arch`` (loadable with ``AutoModelForCausalLM``)."""
    return Path(__file__).resolve().parent / "checkpoints" / check_arch(arch)


__all__ = ["DEFAULT_ARCH", "ORGANISM_ARCHS", "check_arch", "checkpoint_path"]
