"""The model ranks > 0 build under FSDP2 (opct/training/sharded_loading.py): the loaded model's structure
without its weights, built from the folder's config alone (the weights file need not exist)."""

from __future__ import annotations

import shutil

import torch

from opct.config import ModelConfig
from opct.models import load_model
from opct.training.sharded_loading import empty_model


def test_the_empty_model_is_the_loaded_one_without_weights_and_never_needs_the_file(tiny_model, tmp_path):
    folder = tmp_path / "no-weights"
    shutil.copytree(tiny_model, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    assert not list(folder.glob("*.safetensors"))
    loaded = load_model(ModelConfig(name_or_path=str(tiny_model)))
    empty = empty_model(ModelConfig(name_or_path=str(folder)), torch.float32)

    assert type(empty) is type(loaded) and not empty.training
    assert all(p.is_meta for p in empty.parameters())  # no storage: rank 0's shards fill them
    want = {n: (t.shape, t.dtype) for n, t in loaded.state_dict().items()}
    assert {n: (t.shape, t.dtype) for n, t in empty.state_dict().items()} == want
    buffers = dict(loaded.named_buffers())  # not saved with the weights: computed, as a normal load does
    assert buffers and all(torch.equal(b, buffers[n]) for n, b in empty.named_buffers())
    assert empty.generation_config.eos_token_id == loaded.generation_config.eos_token_id
    assert next(empty_model(ModelConfig(name_or_path=str(folder)), torch.bfloat16).parameters()).dtype == torch.bfloat16
