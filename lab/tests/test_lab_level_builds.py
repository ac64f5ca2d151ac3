"""The response-diversity study's shipped level builds (lab/opct_lab/checkpoints/) and their model aliases,
registered by ``import opct_lab`` into opct's registry."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opct.config import MODEL_ALIASES
from opct.models import resolve_model_path
from opct.organism.recipe import BuildConfig, read_recipe, verify_checkpoint
from opct.organism.wordings import ResponseStyle
from opct.runs.manifest import sha256_file as file_sha256
from opct_lab import level_builds
from opct_lab.level_builds import (
    CHECKPOINTS,
    SHIPPED_LEVELS,
    WEIGHTS,
    WEIGHTS_COMMIT,
    LevelWeightsDiffer,
    built_level_checkpoint,
    level_checkpoint_path,
    pinned_weights_sha256,
    restore_level_build,
)
from opct_lab.study import levels as study_levels
from opct_lab.study.levels import check_level_folder, ensure_level_builds

CLASSES = {"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM", "gpt2": "GPT2LMHeadModel"}


def test_the_studys_shipped_level_builds_are_their_levels_recipes_and_have_aliases():
    """docs/mechanism.md: the response-diversity study's level organisms are shipped as their recipes, with the sha256
    of the weights their picks were selected on; each verifies against today's recipe for its level, as a study checks
    before training (the weights too, once built), answers to ``organism-<arch>-<level>`` once the lab is imported,
    and together the tracked files stay under 1 MB (the weights, 8-9 MB each, are built, not tracked)."""
    total = 0
    for arch, level in SHIPPED_LEVELS:
        path = level_checkpoint_path(arch, level)
        assert f"organism-{arch}-{level}" in MODEL_ALIASES
        recipe = read_recipe(path)
        style = ResponseStyle.from_level(level)
        assert recipe["config"]["arch"] == arch and json.loads((path / "config.json").read_text())["architectures"] == [CLASSES[arch]]
        assert (recipe["config"]["responses"]["response_wordings"], recipe["config"]["responses"]["response_length"]) == (
            style.response_wordings, style.response_length)
        assert re.fullmatch(r"[0-9a-f]{64}", pinned_weights_sha256(arch, level))
        built = (path / WEIGHTS).is_file()
        config = BuildConfig(arch=arch, responses=style)
        assert verify_checkpoint(path, config) == ([] if built else [f"{WEIGHTS}: missing"])
        if built:
            check_level_folder(path, level, f"{level}.{arch}")  # raises naming what differs
            assert resolve_model_path(f"organism-{arch}-{level}") == str(path)
        # and it is not another level's build
        assert any(p.startswith("recipe_sha256") for p in verify_checkpoint(path, BuildConfig(arch=arch)))
        total += sum(p.stat().st_size for p in path.iterdir() if p.is_file() and p.name != WEIGHTS)
    assert total <= 1e6
    with pytest.raises(ValueError, match="shipped: llama at w4-long"):
        level_checkpoint_path("qwen3", "w16-long")  # failed its check (docs/mechanism.md), so never shipped


def test_a_missing_shipped_level_build_names_its_build_command(monkeypatch, tmp_path):
    monkeypatch.setattr(level_builds, "CHECKPOINTS", tmp_path)
    with pytest.raises(FileNotFoundError, match="--arch qwen3 --response-wordings 4 --response-length long --out"):
        built_level_checkpoint("qwen3", "w4-long")


def test_the_library_alone_knows_no_level_alias():
    """The aliases are the lab's: ``import opct`` registers the organism's families, not the study's levels."""
    code = ("import opct\nfrom opct.config import MODEL_ALIASES\n"
            "print(sorted(n for n in MODEL_ALIASES.names() if n.startswith('organism')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(["organism", "organism-gpt2", "organism-llama", "organism-qwen3"])


def _fake_shipped(root: Path, weights: bytes = b"selected weights") -> Path:
    """A shipped level folder in ``root`` whose recipe pins ``weights`` and its config by sha256."""
    folder = root / "llama-w4-long"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8, "transformers_version": "5.24.0"}))
    pinned = {WEIGHTS: hashlib.sha256(weights).hexdigest(), "config.json": file_sha256(folder / "config.json")}
    (folder / "recipe.json").write_text(json.dumps({"files": pinned}))
    return folder


def _builder(weights: bytes, calls: list[str], hidden_size: int = 8):
    """A stand-in for the organism build: writes ``weights`` and a config from another transformers version."""
    def build(out: Path, arch: str, level: str, log) -> None:
        calls.append(f"{arch}-{level}")
        out.mkdir()
        (out / WEIGHTS).write_bytes(weights)
        (out / "config.json").write_text(json.dumps({"hidden_size": hidden_size, "transformers_version": "5.25.0"}))
    return build


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_a_level_build_is_built_in_place_only_byte_for_byte_as_pinned_then_left_alone(monkeypatch, tmp_path):
    """Not a checkout (no history): built from the recipe, kept because the weights are the pinned bytes (the config
    differs only in the transformers version that wrote it); then present, and not built again."""
    folder = _fake_shipped(tmp_path)
    monkeypatch.setattr(level_builds, "CHECKPOINTS", tmp_path)
    (tmp_path / ".llama-w4-long.build").mkdir()  # an interrupted build: started again, not reused
    (tmp_path / ".llama-w4-long.build" / WEIGHTS).write_bytes(b"half")
    calls: list[str] = []
    with pytest.raises(FileNotFoundError, match="opct-lab build-levels"):
        built_level_checkpoint("llama", "w4-long")
    logged: list[str] = []
    assert restore_level_build("llama", "w4-long", log=logged.append, build=_builder(b"selected weights", calls)) == "built"
    assert "not in a git checkout" in logged[0]
    assert (folder / WEIGHTS).read_bytes() == b"selected weights" and not (tmp_path / ".llama-w4-long.build").exists()
    assert built_level_checkpoint("llama", "w4-long") == folder
    assert restore_level_build("llama", "w4-long", log=lambda s: None, build=_builder(b"x", calls)) == "present"
    assert calls == ["llama-w4-long"]  # the second call built nothing


def test_a_level_build_that_rounds_differently_is_kept_aside_and_named_never_put_in_place(monkeypatch, tmp_path):
    folder = _fake_shipped(tmp_path)
    monkeypatch.setattr(level_builds, "CHECKPOINTS", tmp_path)
    other = hashlib.sha256(b"other rounding").hexdigest()[:12]
    with pytest.raises(LevelWeightsDiffer, match=rf"differs from the pinned one in {WEIGHTS} \(kept in .*rebuilt-{other}\)"):
        restore_level_build("llama", "w4-long", log=lambda s: None, build=_builder(b"other rounding", []))
    assert not (folder / WEIGHTS).exists()
    assert (tmp_path / f"llama-w4-long.rebuilt-{other}" / WEIGHTS).read_bytes() == b"other rounding"
    with pytest.raises(LevelWeightsDiffer, match="in config.json"):  # the same weights, another shape: refused too
        restore_level_build("llama", "w4-long", log=lambda s: None, build=_builder(b"selected weights", [], 16))
    (folder / WEIGHTS).write_bytes(b"edited")  # weights in place that are not the pinned ones are refused
    with pytest.raises(LevelWeightsDiffer, match="is not the pinned"):
        restore_level_build("llama", "w4-long", log=lambda s: None, build=_builder(b"selected weights", []))


def test_a_level_builds_weights_come_back_from_the_history_checked_against_the_pin(monkeypatch, tmp_path):
    """In a checkout, the weights come from the pinned commit in a second, with no build; a commit holding other
    weights than the pin is not taken (the build runs instead)."""
    repo = tmp_path / "repo"
    folder = _fake_shipped(repo / "checkpoints")
    (folder / WEIGHTS).write_bytes(b"selected weights")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "weights")
    monkeypatch.setattr(level_builds, "CHECKPOINTS", repo / "checkpoints")
    monkeypatch.setattr(level_builds, "WEIGHTS_COMMIT", _git(repo, "rev-parse", "HEAD"))
    (folder / WEIGHTS).unlink()
    calls: list[str] = []
    assert restore_level_build("llama", "w4-long", log=lambda s: None, build=_builder(b"x", calls)) == "restored"
    assert (folder / WEIGHTS).read_bytes() == b"selected weights" and calls == []
    (folder / WEIGHTS).write_bytes(b"tampered")
    _git(repo, "commit", "-qam", "other weights")
    monkeypatch.setattr(level_builds, "WEIGHTS_COMMIT", _git(repo, "rev-parse", "HEAD"))
    (folder / WEIGHTS).unlink()
    logged: list[str] = []
    assert restore_level_build("llama", "w4-long", log=logged.append, build=_builder(b"selected weights", calls)) == "built"
    assert "holds other weights than the pinned ones" in logged[0] and calls == ["llama-w4-long"]


def test_the_pinned_commit_holds_every_shipped_level_builds_selected_weights():
    """This repository's history holds the weights each recipe.json pins, at WEIGHTS_COMMIT (unless this is a
    shallow clone without it, which restore_level_build then says)."""
    top = _git(CHECKPOINTS, "rev-parse", "--show-toplevel")
    has = subprocess.run(["git", "-C", top, "cat-file", "-e", f"{WEIGHTS_COMMIT}^{{commit}}"], capture_output=True)
    if has.returncode != 0:
        assert _git(CHECKPOINTS, "rev-parse", "--is-shallow-repository") == "true"
        return
    for arch, level in SHIPPED_LEVELS:
        rel = (level_checkpoint_path(arch, level) / WEIGHTS).relative_to(Path(top)).as_posix()
        blob = subprocess.run(["git", "-C", top, "cat-file", "blob", f"{WEIGHTS_COMMIT}:{rel}"], capture_output=True,
                              check=True).stdout
        assert hashlib.sha256(blob).hexdigest() == pinned_weights_sha256(arch, level)


def test_a_study_builds_a_shipped_level_builds_weights_first(monkeypatch):
    """ensure_level_builds hands a shipped level alias to restore_level_build before checking the folder."""
    asked: list[tuple[str, str]] = []
    checked: list[str] = []

    def restore(arch: str, level: str, *, log) -> str:
        asked.append((arch, level))
        return "built"

    monkeypatch.setattr(study_levels, "check_level_folder", lambda folder, level, family: checked.append(family))
    monkeypatch.setattr("opct.models.resolve_model_path", lambda m: "/x")  # the weights are not built: restore is faked
    done = ensure_level_builds({"w4-long": ["w4-long.llama"]}, {"w4-long.llama": "organism-llama-w4-long"},
                               log=lambda s: None, build=lambda *a: pytest.fail("no organism build"), restore=restore)
    assert done == {"w4-long.llama": "built"} and asked == [("llama", "w4-long")] and checked == ["w4-long.llama"]
