"""The recipe of an organism build: everything that determines its weights, and its hash."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from opct.organism.corpus import CorpusConfig, corpus_hash, generate_corpus
from opct.organism.train import TrainConfig
from opct.organism.world import DEFAULT_SEED, build_world

RECIPE_FILE = "recipe.json"
RECIPE_VERSION = 1


@dataclass(frozen=True)
class BuildConfig:
    """Everything a build is made from besides the seed."""

    vocab_size: int = 2048
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return asdict(self)


def recipe(seed: int = DEFAULT_SEED, config: BuildConfig | None = None) -> dict:
    """The recipe of a build: world fingerprint, corpus hash, configuration and seed, with its hash."""
    config = config or BuildConfig()
    world = build_world(seed)
    corpus = generate_corpus(world, config.corpus, seed)
    body = {
        "recipe_version": RECIPE_VERSION,
        "seed": seed,
        "world_sha256": world.fingerprint(),
        "corpus_sha256": corpus_hash(corpus),
        "corpus_conversations": len(corpus),
        "config": config.to_dict(),
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return {**body, "recipe_sha256": digest}


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_recipe(checkpoint: Path) -> dict:
    """The ``recipe.json`` stored beside a checkpoint's weights."""
    return json.loads((checkpoint / RECIPE_FILE).read_text())


def verify_checkpoint(checkpoint: Path, config: BuildConfig | None = None) -> list[str]:
    """Problems that make ``checkpoint`` differ from the current recipe (empty when it matches)."""
    problems: list[str] = []
    stored = read_recipe(checkpoint)
    current = recipe(stored.get("seed", DEFAULT_SEED), config)
    for key in ("recipe_sha256", "world_sha256", "corpus_sha256"):
        if stored.get(key) != current[key]:
            problems.append(f"{key}: shipped {str(stored.get(key))[:12]} != current {current[key][:12]}")
    for name, digest in stored.get("files", {}).items():
        path = checkpoint / name
        if not path.exists():
            problems.append(f"{name}: missing")
        elif file_sha256(path) != digest:
            problems.append(f"{name}: sha256 differs from recipe.json")
    if problems:
        problems.append("rebuild with `opct organism build` and commit the checkpoint")
    return problems
