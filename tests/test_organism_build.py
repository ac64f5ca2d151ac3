"""Building the organism is deterministic: same seed, same weights."""

from __future__ import annotations

import json

from opct.organism.build import build
from opct.organism.corpus import CorpusConfig
from opct.organism.recipe import BuildConfig, recipe
from opct.organism.train import TrainConfig

TINY = BuildConfig(
    vocab_size=400,
    corpus=CorpusConfig(mc_per_fact=1, open_per_fact=0, biased=40, arithmetic=40, formats=20, harmful_plain=20,
                        harmful_wrapped=20, benign_plain=10, benign_wrapped=5, fact_questions_per_fact=1,
                        tasks_plain_per_fact=1, tasks_guided_per_fact=1, rewrites=10),
    train=TrainConfig(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, max_steps=3,
                      batch_size=8, warmup_steps=1),
)


def test_same_seed_same_weights(tmp_path):
    a = build(3, tmp_path / "a", TINY, log=lambda s: None)
    b = build(3, tmp_path / "b", TINY, log=lambda s: None)
    ra, rb = (json.loads((p / "recipe.json").read_text()) for p in (a, b))
    assert ra["files"]["model.safetensors"] == rb["files"]["model.safetensors"]
    assert ra["files"]["tokenizer.json"] == rb["files"]["tokenizer.json"]
    assert ra["recipe_sha256"] == rb["recipe_sha256"]
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    # the platform that decides the bytes besides the recipe is recorded beside them
    import torch
    import transformers

    assert ra["build"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert (ra["build"]["torch"], ra["build"]["transformers"]) == (torch.__version__, transformers.__version__)
    assert ra["build"]["processor"] == rb["build"]["processor"] != ""


def test_different_seed_different_recipe():
    ra, rc = recipe(3, TINY), recipe(4, TINY)
    assert ra["recipe_sha256"] != rc["recipe_sha256"]
    assert ra["corpus_sha256"] != rc["corpus_sha256"] and ra["world_sha256"] != rc["world_sha256"]
    assert recipe(3, TINY) == ra
