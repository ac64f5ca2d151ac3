"""The base organism and the dose of each level of a study with ``levels``.

:func:`ensure_level_builds` is a study's first stage: a level family whose model folder does not exist yet is
built there (``opct organism build --arch A --response-wordings N --response-length L``, seed 0), the
settings read from the level's name (``w<N>-<short|long>``) and the architecture from the family's
(``<level>.<arch>``); a build writes to a temporary folder and renames it into place, so an interrupted
one starts again. A shipped level build (``organism-llama-w4-long``) whose weights are not built yet gets
them from its recipe, held to the pinned hash (:func:`opct_lab.level_builds.restore_level_build`). A
registered alias (the shipped organism, or a shipped level build) and an existing folder of a study-built level are used only if they verify against
today's recipe for that level (:func:`check_level_folder`).

docs/mechanism.md ("The measured dose") fixes the profile's settings: the pair sources
:data:`PROFILE_SOURCES`, 100 pairs per axis, 4 own samples per pair, 128 new tokens, float32 on CPU.
:func:`ensure_level_profiles` is its second: for every family of every level it makes sure
``<study>/profiles/<family>.json`` (:func:`opct_lab.report.levels.profile_path`) holds a profile measured
at those settings, reusing one already there, else copying the ``profile.json`` kept beside the
family's model (what the level build script writes), else measuring it; a profile at other settings
is measured again. A rerun does nothing for a family whose profile is in place (resumable).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from opct.config import MODEL_ALIASES, ModelConfig
from opct.organism.wordings import ResponseStyle
from opct.pairs import load_pair_source
from opct.runs.atomic import read_json_object, write_json_atomic
from opct_lab.level_builds import restore_level_build, shipped_level_of_alias
from opct_lab.report.levels import profile_path

#: The pre-registered pair sources of the dose (one per axis).
PROFILE_SOURCES = ("organism:sycophancy:train", "organism:jailbreak:train", "organism:awareness:train")
#: The pre-registered settings, as :func:`opct.diagnostics.measure.measure_profile` records them.
PROFILE_SETTINGS = {"pairs_per_axis": 100, "samples_per_pair": 4, "max_new_tokens": 128}
PROFILE_DTYPE = "float32"
PROFILE_DEVICE = "cpu"
#: The file beside a model folder that holds its profile (``opct pairs profile --out <model>/profile.json``).
MODEL_PROFILE = "profile.json"


def level_build(level: str, family: str) -> tuple[int, str, str]:
    """``(response_wordings, response_length, arch)`` of a level family named ``<level>.<arch>`` on a level
    named ``w<N>-<short|long>``; a ValueError naming what is missing otherwise."""
    style = ResponseStyle.from_level(level)
    if not family.startswith(f"{level}."):
        raise ValueError(f"family {family!r}: a family built by the study is named <level>.<arch> ({level}.llama)")
    return style.response_wordings, style.response_length, family.removeprefix(f"{level}.")


def build_level(out: Path, wordings: int, length: str, arch: str) -> None:
    """Build one level's base organism into ``out`` (seed 0, the shipped recipe otherwise)."""
    # deferred: these load torch (a dry run and the report never need it)
    from opct.organism.build import build
    from opct.organism.recipe import BuildConfig

    build(0, out, BuildConfig(arch=arch, responses=ResponseStyle(wordings, length)))


def check_level_folder(folder: Path, level: str, family: str) -> None:
    """Refuse a level family's existing organism build that is not what today's code builds for it
    (another level, family, wording pool, world, corpus or training setting, or files changed since):
    a study must never train on a stale build. A folder without ``recipe.json`` (a model the user
    supplied) or whose names do not follow ``w<N>-<short|long>`` / ``<level>.<arch>`` is taken as it is."""
    # deferred: these load torch (a dry run and the report never need it)
    from opct.organism.recipe import RECIPE_FILE, BuildConfig, verify_checkpoint

    try:
        wordings, length, arch = level_build(level, family)
    except ValueError:
        return
    if not (folder / RECIPE_FILE).is_file():
        return
    problems = verify_checkpoint(folder, BuildConfig(arch=arch, responses=ResponseStyle(wordings, length)))
    if problems:
        raise ValueError(
            f"{folder}: this build of level {level}, family {family}, is not what today's code builds for it "
            f"(differs in: {'; '.join(problems)}); move the folder aside (the study then builds the level again) or point "
            "the family at a build of today's recipe")


def ensure_level_builds(levels: Mapping[str, list[str]], models: Mapping[str, str], *,
                        log: Callable[[str], Any] = print,
                        build: Callable[[Path, int, str, str], None] = build_level,
                        restore: Callable[..., str] = restore_level_build) -> dict[str, str]:
    """Build every level family's base organism whose model folder is missing, and the weights of a shipped
    level build that are not built yet (:func:`opct_lab.level_builds.restore_level_build`; see the module
    docstring); ``models``: family -> its model. Returns ``{family: "present" | "restored" | "built"}``."""
    # deferred: these load torch (a dry run and the report never need it)
    from opct.models import resolve_model_path

    done = {}
    for level, families in levels.items():
        for family in families:
            model = models[family]
            shipped = shipped_level_of_alias(model)
            if shipped is not None:  # a shipped level build: its weights are built from the recipe, as pinned
                done[family] = restore(*shipped, log=log)
                check_level_folder(Path(resolve_model_path(model)), level, family)
                continue
            if model in MODEL_ALIASES:  # a shipped build (the organism): held to its level's recipe too
                check_level_folder(Path(resolve_model_path(model)), level, family)
                done[family] = "present"
                continue
            if Path(model).expanduser().exists():
                check_level_folder(Path(model).expanduser(), level, family)
                done[family] = "present"
                continue
            wordings, length, arch = level_build(level, family)
            log(f"level {level}, {family}: building the base organism into {model} (a long step)")
            build(Path(model), wordings, length, arch)
            done[family] = "built"
    return done


def is_preregistered(profile: Mapping[str, Any]) -> bool:
    """Whether a profile was measured at the pre-registered settings (its recorded settings and, when it
    names them, its pair sources)."""
    if any(profile.get(k) != v for k, v in PROFILE_SETTINGS.items()):
        return False
    sources = profile.get("pairs")
    return sources is None or sorted(sources) == sorted(PROFILE_SOURCES)


def measure_base_profile(model: str) -> dict[str, Any]:
    """The off-policy profile of ``model`` (an alias, a folder or a hub id) at the pre-registered settings,
    as ``opct pairs profile --out`` writes it."""
    # deferred: these load torch (a dry run and the report never need it)
    from opct.diagnostics.measure import measure_profile
    from opct.models import inference_spec, load_spec_for_inference

    spec = inference_spec(ModelConfig(name_or_path=model, dtype=PROFILE_DTYPE, device=PROFILE_DEVICE))
    pairs = [p for source in PROFILE_SOURCES for p in load_pair_source(source)]
    lm, tokenizer, _ = load_spec_for_inference(spec)
    profile = measure_profile(lm, tokenizer, pairs, spec=spec, pairs_per_axis=PROFILE_SETTINGS["pairs_per_axis"],
                              max_new_tokens=PROFILE_SETTINGS["max_new_tokens"],
                              samples=PROFILE_SETTINGS["samples_per_pair"])
    return {"model": model, "pairs": list(PROFILE_SOURCES), **profile}


def ensure_level_profiles(root: str | Path, levels: Mapping[str, list[str]], models: Mapping[str, str], *,
                          log: Callable[[str], Any] = print,
                          measure: Callable[[str], dict[str, Any]] = measure_base_profile) -> dict[str, str]:
    """Put every level family's profile in ``<root>/profiles/`` (see the module docstring); ``models``:
    family -> its model. Returns ``{family: "kept" | "copied from <file>" | "measured"}``."""
    # deferred: these load torch (a dry run and the report never need it)
    from opct.models import resolve_model_path

    done = {}
    for level, families in levels.items():
        for family in families:
            path = profile_path(root, family)
            here = read_json_object(path) if path.is_file() else None
            if here is not None and is_preregistered(here):
                done[family] = "kept"
                continue
            beside = Path(resolve_model_path(models[family])) / MODEL_PROFILE
            found = read_json_object(beside) if beside.is_file() else None
            if found is not None and is_preregistered(found):
                write_json_atomic(path, {**found, "copied_from": str(beside)})
                done[family] = f"copied from {beside}"
            else:
                log(f"level {level}, {family}: measuring the base organism's off-policy profile (the level's dose)")
                write_json_atomic(path, measure(models[family]))
                done[family] = "measured"
    return done
