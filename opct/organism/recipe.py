"""The recipe of an organism build: everything that determines its weights, and its hash."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from opct.errors import read_json
from opct.organism import DEFAULT_ARCH, check_arch
from opct.organism.corpus import CorpusConfig, corpus_hash, generate_corpus
from opct.organism.train import TrainConfig, default_train_config
from opct.organism.wordings import ResponseStyle
from opct.organism.world import DEFAULT_SEED, build_world

RECIPE_FILE = "recipe.json"
RECIPE_VERSION = 1


@dataclass(frozen=True)
class BuildConfig:
    """Everything a build is made from besides the seed.

    ``arch`` is the transformers family (one of :data:`opct.organism.ORGANISM_ARCHS`); ``train``
    left out becomes that family's default (:func:`opct.organism.train.default_train_config`), so
    after construction it is never None. ``responses`` is the response-diversity knob
    (:mod:`opct.organism.wordings`); at its default (today's organism) it is left out of the recipe, so
    today's recipe hash is unchanged.
    """

    arch: str = DEFAULT_ARCH
    vocab_size: int = 2048
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    train: TrainConfig | None = None  # None: filled in with the family's default shape
    responses: ResponseStyle = field(default_factory=ResponseStyle)

    def __post_init__(self) -> None:
        check_arch(self.arch)
        if self.train is None:
            object.__setattr__(self, "train", default_train_config(self.arch))

    def to_dict(self) -> dict:
        """The configuration as stored in a recipe (``responses`` only when it is not the default)."""
        out = asdict(self)
        out.pop("responses")
        if not self.responses.is_default:
            out["responses"] = self.responses.to_dict()
        return out


def recipe_arch(stored: dict) -> str:
    """The family a stored recipe was built on (recipes from before the families are Llama's)."""
    return stored.get("config", {}).get("arch", DEFAULT_ARCH)


def recipe_responses(stored: dict) -> ResponseStyle:
    """The response-diversity level a stored recipe was built at (today's when it names none)."""
    given = stored.get("config", {}).get("responses") or {}
    return ResponseStyle(given.get("response_wordings", 1), given.get("response_length", "short"))


def recipe(seed: int = DEFAULT_SEED, config: BuildConfig | None = None) -> dict:
    """The recipe of a build: world fingerprint, corpus hash, configuration (architecture included) and
    seed, with its hash."""
    config = config or BuildConfig()
    world = build_world(seed)
    corpus = generate_corpus(world, config.corpus, seed, config.responses)
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
    return read_json(checkpoint / RECIPE_FILE, "build the checkpoint again (opct organism build) or restore its folder")


def verify_checkpoint(checkpoint: Path, config: BuildConfig | None = None) -> list[str]:
    """Problems that make ``checkpoint`` differ from the current recipe (empty when it matches).

    Without ``config`` the current recipe is the default one of the family the checkpoint records.
    """
    problems: list[str] = []
    stored = read_recipe(checkpoint)
    arch = recipe_arch(stored)
    current = recipe(stored.get("seed", DEFAULT_SEED), config or BuildConfig(arch=arch, responses=recipe_responses(stored)))
    for key in ("recipe_sha256", "world_sha256", "corpus_sha256"):
        if stored.get(key) != current[key]:
            problems.append(f"{key}: shipped {str(stored.get(key))[:12]} != current {current[key][:12]}")
    for name, digest in stored.get("files", {}).items():
        path = checkpoint / name
        if not path.exists():
            problems.append(f"{name}: missing")
        elif file_sha256(path) != digest:
            problems.append(f"{name}: sha256 differs from recipe.json")
    return problems
