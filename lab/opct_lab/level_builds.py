"""The response-diversity study's shipped level builds (docs/mechanism.md) and their model aliases.

Each ``checkpoints/<arch>-<level>/`` beside this module is ``opct organism build --arch A --response-wordings N
--response-length L`` for its level ``w<N>-<L>`` (seed 0), rebuilt byte for byte: the exact weights the
levels' recipes were selected on. :func:`register_level_aliases` (run by ``import opct_lab``) registers each
as ``organism-<arch>-<level>`` in opct's :data:`~opct.config.MODEL_ALIASES`; the library never names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from opct.config import MODEL_ALIASES
from opct.organism import check_arch, level_settings

#: The study's level builds that are shipped, as ``(arch, level)``.
SHIPPED_LEVELS: tuple[tuple[str, str], ...] = (("llama", "w4-long"), ("llama", "w16-long"), ("qwen3", "w4-long"))
#: Where the shipped level builds are.
CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"


def level_checkpoint_path(arch: str, level: str) -> Path:
    """The folder of the shipped build of ``arch`` at ``level`` (one of :data:`SHIPPED_LEVELS`); a ValueError
    naming the shipped ones and the build command otherwise."""
    if (check_arch(arch), level) not in SHIPPED_LEVELS:
        shipped = ", ".join(f"{a} at {lv}" for a, lv in SHIPPED_LEVELS)
        raise ValueError(f"no shipped organism build of {arch} at level {level!r} (shipped: {shipped}); build it with "
                         "`opct organism build --arch A --response-wordings N --response-length L --out DIR`")
    return CHECKPOINTS / f"{arch}-{level}"


def built_level_checkpoint(arch: str, level: str) -> Path:
    """The shipped build of ``arch`` at ``level``; a ``FileNotFoundError`` naming its build command when its folder
    has no model."""
    path = level_checkpoint_path(arch, level)
    if not (path / "config.json").is_file():
        wordings, length = level_settings(level)
        raise FileNotFoundError(f"the {arch} organism at level {level} is not in {path}; build it with `opct organism build "
                                f"--arch {arch} --response-wordings {wordings} --response-length {length} --out {path}`")
    return path


@dataclass(frozen=True)
class LevelCheckpoint:
    """The model alias of one shipped level build: called, the directory of its checkpoint."""

    arch: str
    level: str

    def __call__(self) -> Path:
        return built_level_checkpoint(self.arch, self.level)


def level_alias(arch: str, level: str) -> str:
    """``organism-<arch>-<level>``: the model alias of a shipped level build."""
    return f"organism-{arch}-{level}"


def register_level_aliases() -> None:
    """Register every shipped level build as a model alias (idempotent)."""
    for arch, level in SHIPPED_LEVELS:
        if not MODEL_ALIASES.is_registered(level_alias(arch, level)):
            MODEL_ALIASES.register(level_alias(arch, level), LevelCheckpoint(arch, level))
