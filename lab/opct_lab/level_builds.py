"""The response-diversity study's level builds (docs/mechanism.md): their model aliases, and their weights put in
place from the repository's history, held to the hash the picks were selected on.

Each ``checkpoints/<arch>-<level>/`` beside this module holds ``opct organism build --arch A
--response-wordings N --response-length L`` for its level ``w<N>-<L>`` (seed 0): its ``recipe.json``,
config, tokenizer and chat template are tracked, and its ``recipe.json`` pins the sha256 of the
``model.safetensors`` the study's picks were selected on. The weights themselves (8-9 MB each) left the
tracked tree so that it fits the device transfer (issue 70); they stay in the repository's history, at
:data:`WEIGHTS_COMMIT`. :func:`restore_level_build` (``opct-lab build-levels``, and a study's first stage)
puts them back from there in a second, checked against the pinned sha256.

Where the history is not there (a shallow clone), the weights are built from the recipe, and kept in place
only if byte for byte the pinned ones. That holds only on the machine kind they were built on: a build on
another processor rounds differently and, over 4,585 steps, ends as another model (measured: docs/mechanism.md,
"The level builds' weights leave the tracked tree"). Such a build is kept beside the folder under its own
hash and named in the error, never put in place of the selected weights.

:func:`register_level_aliases` (run by ``import opct_lab``) registers each as ``organism-<arch>-<level>`` in
opct's :data:`~opct.config.MODEL_ALIASES`; the library never names them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.config import MODEL_ALIASES
from opct.organism import check_arch, level_settings
from opct.runs.manifest import sha256_file as file_sha256

#: The study's level builds that are shipped, as ``(arch, level)``.
SHIPPED_LEVELS: tuple[tuple[str, str], ...] = (("llama", "w4-long"), ("llama", "w16-long"), ("qwen3", "w4-long"))
#: Where the shipped level builds are.
CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"
#: The weights file of a level build: pinned by its ``recipe.json``, built by :func:`restore_level_build`.
WEIGHTS = "model.safetensors"
#: The recipe file of a build (``opct.organism.recipe.RECIPE_FILE``; that module loads torch).
RECIPE_FILE = "recipe.json"
#: The last commit whose tree holds every level build's weights (their sha256 are pinned by each recipe.json).
WEIGHTS_COMMIT = "b42642f690d54ce8214bd60677ecefce5cb4ea06"
#: Files a build writes that record the library version that wrote them (compared without that key).
VERSIONED_JSON = ("config.json", "generation_config.json")
#: The command that puts the weights that are not in place.
BUILD_COMMAND = "opct-lab build-levels"


def level_checkpoint_path(arch: str, level: str) -> Path:
    """The folder of the shipped build of ``arch`` at ``level`` (one of :data:`SHIPPED_LEVELS`); a ValueError
    naming the shipped ones and the build command otherwise."""
    if (check_arch(arch), level) not in SHIPPED_LEVELS:
        shipped = ", ".join(f"{a} at {lv}" for a, lv in SHIPPED_LEVELS)
        raise ValueError(f"no shipped organism build of {arch} at level {level!r} (shipped: {shipped}); build it with "
                         "`opct organism build --arch A --response-wordings N --response-length L --out DIR`")
    return CHECKPOINTS / f"{arch}-{level}"


def read_recipe(folder: Path) -> dict[str, Any]:
    """A build folder's ``recipe.json``."""
    return json.loads((folder / RECIPE_FILE).read_text(encoding="utf-8"))


def pinned_weights_sha256(arch: str, level: str) -> str:
    """The sha256 of the weights the level's picks were selected on (its ``recipe.json``)."""
    return read_recipe(level_checkpoint_path(arch, level))["files"][WEIGHTS]


def built_level_checkpoint(arch: str, level: str) -> Path:
    """The shipped build of ``arch`` at ``level``; a ``FileNotFoundError`` naming the command that builds it when
    its folder has no recipe or no weights."""
    path = level_checkpoint_path(arch, level)
    if not (path / RECIPE_FILE).is_file():
        wordings, length = level_settings(level)
        raise FileNotFoundError(f"the {arch} organism at level {level} is not in {path}; build it with `opct organism build "
                                f"--arch {arch} --response-wordings {wordings} --response-length {length} --out {path}`")
    if not (path / WEIGHTS).is_file():
        raise FileNotFoundError(
            f"the weights of {level_alias(arch, level)} ({path / WEIGHTS}) are not built yet: they are kept out of the "
            f"tracked tree and put back from the repository's history by `{BUILD_COMMAND}` (seconds; a study does it "
            "as its first step)")
    return path


def _same_file(name: str, built: Path, shipped: Path) -> bool:
    if name in VERSIONED_JSON:  # the version of transformers that wrote it is not part of the model
        def read(path: Path) -> dict[str, Any]:
            return {k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if k != "transformers_version"}
        return read(built) == read(shipped)
    return file_sha256(built) == file_sha256(shipped)


def _differing_files(built: Path, shipped: Path, names: list[str]) -> list[str]:
    """The files of ``names`` that a build in ``built`` has otherwise than the shipped folder (weights: by hash)."""
    return sorted(n for n in names if not (built / n).is_file() or not (shipped / n).is_file()
                  or not _same_file(n, built / n, shipped / n))


def weights_from_history(arch: str, level: str, out: Path) -> str | None:
    """Write the level build's weights as :data:`WEIGHTS_COMMIT` holds them into ``out``; None when done, else why
    not (no git, not a checkout, a shallow clone without that commit)."""
    path = level_checkpoint_path(arch, level)
    try:
        top = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    except OSError:
        return "git is not installed"
    if top.returncode != 0:
        return f"{path} is not in a git checkout"
    rel = (path / WEIGHTS).resolve().relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    with open(out, "wb") as f:
        shown = subprocess.run(["git", "-C", top.stdout.strip(), "cat-file", "blob", f"{WEIGHTS_COMMIT}:{rel}"],
                               stdout=f, stderr=subprocess.PIPE, text=False)
    if shown.returncode != 0:
        out.unlink(missing_ok=True)
        return (f"the history does not hold commit {WEIGHTS_COMMIT[:12]} (a shallow clone? `git fetch --unshallow` "
                "brings it)")
    return None


def _build_organism(out: Path, arch: str, level: str, log: Callable[[str], Any]) -> None:
    # deferred: these load torch (aliases and dry runs never need it)
    from opct.organism.build import build
    from opct.organism.recipe import BuildConfig
    from opct.organism.wordings import ResponseStyle

    wordings, length = level_settings(level)
    build(0, out, BuildConfig(arch=arch, responses=ResponseStyle(wordings, length)), log=log)


class LevelWeightsDiffer(RuntimeError):
    """A level build made here is not the build its picks were selected on (kept aside, never put in place)."""


def restore_level_build(arch: str, level: str, *, log: Callable[[str], Any] = print,
                        build: Callable[[Path, str, str, Callable[[str], Any]], None] = _build_organism) -> str:
    """Put the weights of the shipped level build of ``arch`` at ``level`` in place: ``"present"`` when they
    already are (with the pinned hash), ``"restored"`` from the repository's history, ``"built"`` from the recipe.

    Every source is checked against the sha256 the shipped ``recipe.json`` pins before anything is put in place.
    A build goes to a scratch folder beside the shipped one (an interrupted one starts again); unless its weights
    and the other files are the shipped ones (a config compared without the version of transformers that wrote
    it), it is kept as ``<arch>-<level>.rebuilt-<sha12>/`` and :class:`LevelWeightsDiffer` names it.
    """
    path = level_checkpoint_path(arch, level)
    recipe_files = read_recipe(path)["files"]
    pinned = recipe_files[WEIGHTS]
    weights = path / WEIGHTS
    if weights.is_file():
        if file_sha256(weights) != pinned:
            raise LevelWeightsDiffer(f"{weights}: sha256 {file_sha256(weights)[:12]} is not the pinned "
                                     f"{pinned[:12]} (recipe.json); move it aside and run `{BUILD_COMMAND}`")
        return "present"
    partial = path / f".{WEIGHTS}.partial"
    why_not = weights_from_history(arch, level, partial)
    if why_not is None:
        if file_sha256(partial) == pinned:
            os.replace(partial, weights)
            log(f"{level_alias(arch, level)}: weights restored from commit {WEIGHTS_COMMIT[:12]}, sha256 {pinned[:12]}")
            return "restored"
        partial.unlink()
        why_not = f"commit {WEIGHTS_COMMIT[:12]} holds other weights than the pinned ones"
    scratch = path.parent / f".{path.name}.build"
    shutil.rmtree(scratch, ignore_errors=True)  # an interrupted build starts again
    log(f"{level_alias(arch, level)}: not from the history ({why_not}); building its weights from the recipe into "
        f"{scratch} (a long step; byte for byte only on the machine kind it was first built on)")
    build(scratch, arch, level, log)
    differ = _differing_files(scratch, path, sorted(set(recipe_files) - {WEIGHTS})) + (
        [WEIGHTS] if file_sha256(scratch / WEIGHTS) != pinned else [])
    if differ:
        kept = path.parent / f"{path.name}.rebuilt-{file_sha256(scratch / WEIGHTS)[:12]}"
        shutil.rmtree(kept, ignore_errors=True)
        os.replace(scratch, kept)
        raise LevelWeightsDiffer(
            f"{level_alias(arch, level)}: the build made here differs from the pinned one in {', '.join(sorted(differ))} "
            f"(kept in {kept}); the study's picks were selected on sha256 {pinned[:12]}, so this build is another "
            "model (another processor rounds differently): get the history (`git fetch --unshallow`) for the pinned "
            "weights, or point the family's model at the kept folder to train on it anyway, knowing its recipes "
            "were not selected on it")
    os.replace(scratch / WEIGHTS, weights)
    shutil.rmtree(scratch)
    log(f"{level_alias(arch, level)}: built, sha256 {pinned[:12]} as pinned")
    return "built"


def shipped_level_of_alias(model: str) -> tuple[str, str] | None:
    """``(arch, level)`` when ``model`` is the alias of a shipped level build, else None."""
    return next(((a, lv) for a, lv in SHIPPED_LEVELS if level_alias(a, lv) == model), None)


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
