"""The response-diversity study's shipped level builds (lab/opct_lab/checkpoints/) and their model aliases,
registered by ``import opct_lab`` into opct's registry."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from opct.config import MODEL_ALIASES
from opct.models import resolve_model_path
from opct.organism.recipe import read_recipe
from opct.organism.wordings import ResponseStyle
from opct_lab import level_builds
from opct_lab.level_builds import SHIPPED_LEVELS, built_level_checkpoint, level_checkpoint_path
from opct_lab.study.levels import check_level_folder

CLASSES = {"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM", "gpt2": "GPT2LMHeadModel"}


def test_the_studys_shipped_level_builds_are_their_levels_recipes_and_have_aliases():
    """docs/mechanism.md: the response-diversity study's level organisms are shipped (the weights their recipes
    were selected on); each verifies against today's recipe for its level, as a study checks before training,
    answers to ``organism-<arch>-<level>`` once the lab is imported, and together they stay under 27 MB."""
    total = 0
    for arch, level in SHIPPED_LEVELS:
        path = level_checkpoint_path(arch, level)
        assert resolve_model_path(f"organism-{arch}-{level}") == str(path) and f"organism-{arch}-{level}" in MODEL_ALIASES
        recipe = read_recipe(path)
        style = ResponseStyle.from_level(level)
        assert recipe["config"]["arch"] == arch and json.loads((path / "config.json").read_text())["architectures"] == [CLASSES[arch]]
        assert (recipe["config"]["responses"]["response_wordings"], recipe["config"]["responses"]["response_length"]) == (
            style.response_wordings, style.response_length)
        check_level_folder(path, level, f"{level}.{arch}")  # raises naming what differs
        with pytest.raises(ValueError, match="differs in"):  # and it is not another level's build
            check_level_folder(path, "w1-short", f"w1-short.{arch}")
        total += sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    assert total <= 27e6
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
