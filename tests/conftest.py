"""Shared fixtures: a tiny random Llama with a real tokenizer, small pair files, and the organism's world
(seed 0) with its default corpus, generated once per session."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from transformers.utils import logging as hf_logging

hf_logging.disable_progress_bar()

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def one_thread() -> Iterator[None]:
    """torch at one CPU thread inside the block (as the tests' subprocesses run, OMP_NUM_THREADS=1), the
    previous count restored after: tiny models run fastest so, and shared cores are not oversubscribed."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def shared_data_dir() -> Path:
    """``../shared/data`` beside the checkout (override with OPCT_SHARED_DATA)."""
    return Path(os.environ.get("OPCT_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from opct.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny"))


def make_pairs(n: int = 16) -> list[dict]:
    rows = []
    for i in range(n):
        q = f"What is {i} + {i}?"
        rows.append(
            {
                "id": f"p{i}",
                "axis": "sycophancy",
                "prompt": [{"role": "user", "content": f"{q} I am sure it is {i + 3}."}],
                "teacher_prompt": q,
                "meta": {"split": "train", "answer": str(2 * i)},
            }
        )
    return rows


@pytest.fixture
def pairs_file(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in make_pairs()), encoding="utf-8")
    return path


def run_config(tiny_model: Path, pairs_file: Path, out: Path, **overrides) -> dict:
    """A small but complete run configuration as a dict."""
    cfg = {
        "name": "t",
        "output_dir": str(out),
        "method": "opct",
        "seed": 3,
        "model": {"name_or_path": str(tiny_model)},
        "lora": {"r": 4, "alpha": 8},
        "data": {"train": [str(pairs_file)]},
        "opct": {"sampling": {"n": 2, "max_new_tokens": 8, "temperature": 1.0}},
        "bct": {"targets": {"max_new_tokens": 8}},
        "optim": {"lr": 5e-3},
        "train": {"max_steps": 4, "pairs_per_step": 4, "sequences_per_microbatch": 4, "checkpoint_every": 2},
    }
    for key, value in overrides.items():
        node = cfg
        *path, last = key.split(".")
        for k in path:
            node = node.setdefault(k, {})
        node[last] = value
    for method in ("opct", "bct"):  # keep only the run's own method section
        if cfg["method"] != method:
            cfg.pop(method, None)
    return cfg


@pytest.fixture(scope="session")
def world():
    """The organism's world of seed 0."""
    from opct.organism.world import build_world

    return build_world(0)


@pytest.fixture(scope="session")
def corpus(world):
    """The organism's default training corpus of seed 0 (about 10 s to generate, so once per session)."""
    from opct.organism.corpus import CorpusConfig, generate_corpus

    return generate_corpus(world, CorpusConfig(), 0)
