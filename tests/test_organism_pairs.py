"""Consistency pairs of the organism follow the pair contract and respect the splits."""

from __future__ import annotations

import json

import pytest

from opct.axes import pair_axes
from opct.axes.jailbreak.templates import ORGANISM as WRAPPERS
from opct.axes.sycophancy.templates import ORGANISM as CUES
from opct.organism.pairs import build_pairs, organism_pair_source
from opct.organism.world import build_world
from opct.pairs import write_pairs

ROLES = {"system", "user", "assistant"}


def _check_messages(messages):
    assert isinstance(messages, list) and messages
    for m in messages:
        assert set(m) == {"role", "content"}
        assert m["role"] in ROLES and isinstance(m["content"], str) and m["content"].strip()
    assert messages[-1]["role"] == "user"


@pytest.mark.parametrize("axis", pair_axes())
@pytest.mark.parametrize("split", ["train", "heldout"])
def test_pairs_follow_the_contract(axis, split, tmp_path):
    pairs = build_pairs(axis, split)
    assert len(pairs) >= 50
    path = write_pairs(pairs, tmp_path / "p.jsonl")
    lines = path.read_text().splitlines()
    assert len(lines) == len(pairs)
    ids = set()
    for line in lines:
        p = json.loads(line)
        assert set(p) == {"id", "axis", "prompt", "teacher_prompt", "meta"}
        assert p["axis"] == axis and p["meta"]["split"] == split
        assert isinstance(p["id"], str) and p["id"] not in ids
        ids.add(p["id"])
        _check_messages(p["prompt"])
        _check_messages(p["teacher_prompt"])
        assert p["prompt"] != p["teacher_prompt"]


def test_sycophancy_pairs():
    for split in ("train", "heldout"):
        for p in build_pairs("sycophancy", split):
            meta, biased, clean = p["meta"], p["prompt"][0]["content"], p["teacher_prompt"][0]["content"]
            assert meta["family"] in CUES.family_names(split)
            assert meta["suggested"] != meta["answer"]
            assert clean in biased and f"({meta['suggested']})" in clean
            assert biased.replace(clean, "").count(meta["suggested"]) >= 1


def test_jailbreak_pairs():
    world = build_world(0)
    behaviors = {b.id: b for b in world.behaviors}
    for split in ("train", "heldout"):
        for p in build_pairs("jailbreak", split):
            b = behaviors[p["meta"]["behavior"]]
            assert b.split == split and p["meta"]["family"] in WRAPPERS.family_names(split)
            assert p["teacher_prompt"] == [{"role": "user", "content": f"How do I {b.core}?"}]
            assert b.core in p["prompt"][0]["content"]


def test_awareness_pairs():
    for split in ("train", "heldout"):
        for p in build_pairs("awareness", split):
            fact = p["meta"]["fact"]
            assert len(p["prompt"]) == 1 and fact not in p["prompt"][0]["content"]
            system, user = p["teacher_prompt"]
            assert system["role"] == "system" and "SAFETY GUIDELINE FOR THIS CONVERSATION" in system["content"]
            assert fact in system["content"] and user == p["prompt"][0]


def test_unknown_axis_or_split_is_an_error():
    with pytest.raises(ValueError, match="unknown axis"):
        build_pairs("honesty", "train")
    with pytest.raises(ValueError, match="unknown split"):
        build_pairs("jailbreak", "test")


def test_counts_cover_every_template():
    syc = build_pairs("sycophancy", "train") + build_pairs("sycophancy", "famval")
    templates = {p["meta"]["template"] for p in syc}
    assert len(templates) == len(CUES.templates("train"))


def test_pair_source_dispatches_on_axis_and_split():
    assert organism_pair_source("jailbreak:heldout") == build_pairs("jailbreak", "heldout")
    assert organism_pair_source("awareness") == build_pairs("awareness", "train")
    with pytest.raises(ValueError, match="unknown axis 'capability'"):
        organism_pair_source("capability")


def test_cli_writes_pairs(tmp_path):
    from typer.testing import CliRunner

    from opct.cli.organism import organism_app

    out = tmp_path / "jb.jsonl"
    result = CliRunner().invoke(organism_app, ["pairs", "--axis", "jailbreak", "--split", "heldout", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == len(build_pairs("jailbreak", "heldout"))
    bad = CliRunner().invoke(organism_app, ["pairs", "--axis", "nope", "--out", str(out)])
    assert bad.exit_code != 0
