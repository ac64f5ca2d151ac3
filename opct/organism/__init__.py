"""The bundled model organism: a tiny causal LM trained on a synthetic world with exact ground truth.

The same world is built on three transformers families (:data:`ORGANISM_ARCHS`), each shipped in
``checkpoints/<arch>/`` and sharing one trained tokenizer and chat template. The response-diversity
study's other levels (docs/mechanism.md) are builds of the same recipe at other settings of the knob
(:func:`level_settings`); the lab ships the ones it studies (``opct_lab.level_builds``).
"""

from __future__ import annotations

import re
from pathlib import Path

#: The transformers families the organism is built on: ``LlamaForCausalLM``, ``Qwen3ForCausalLM``
#: and ``GPT2LMHeadModel``. The first is the default (the model alias ``organism``).
ORGANISM_ARCHS: tuple[str, ...] = ("llama", "qwen3", "gpt2")
DEFAULT_ARCH = ORGANISM_ARCHS[0]


def level_settings(level: str) -> tuple[int, str]:
    """``(response_wordings, response_length)`` that a level name ``w<N>-<short|long>`` stands for (``w4-long``:
    ``(4, "long")``); a ValueError naming the form otherwise. :meth:`opct.organism.wordings.ResponseStyle.from_level`
    checks the settings themselves."""
    found = re.fullmatch(r"w(\d+)-(short|long)", level)
    if not found:
        raise ValueError(f"level {level!r}: a level built by the study is named w<N>-<short|long> (w4-long)")
    return int(found.group(1)), found.group(2)


def check_arch(arch: str) -> str:
    """``arch`` if it is one of :data:`ORGANISM_ARCHS`, else a ``ValueError`` naming them."""
    if arch not in ORGANISM_ARCHS:
        raise ValueError(f"unknown organism architecture {arch!r}; choose one of: {', '.join(ORGANISM_ARCHS)}")
    return arch


def checkpoint_path(arch: str = DEFAULT_ARCH) -> Path:
    """Directory of the shipped organism checkpoint of ``arch`` (loadable with ``AutoModelForCausalLM``)."""
    return Path(__file__).resolve().parent / "checkpoints" / check_arch(arch)


def built_checkpoint(*archs: str) -> Path:
    """The shipped checkpoint of the first of ``archs`` after checking that every one is built; a
    ``FileNotFoundError`` naming the build command of each family that is not (never a hub lookup)."""
    missing = [a for a in archs if not (checkpoint_path(a) / "config.json").is_file()]
    if missing:
        raise FileNotFoundError(
            f"the {', '.join(missing)} organism is not built in {checkpoint_path(missing[0]).parent}; build it with "
            + " and ".join(f"`opct organism build --arch {a}`" for a in missing))
    return checkpoint_path(archs[0])


__all__ = ["DEFAULT_ARCH", "ORGANISM_ARCHS", "built_checkpoint", "check_arch", "checkpoint_path", "level_settings"]
