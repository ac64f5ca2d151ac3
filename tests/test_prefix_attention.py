"""Shared-prefix decode attention (opct/sampling/prefix_attention.py): the same samples as per-row caches."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from opct.models import load_tokenizer, resolve_model_path
from opct.sampling.engine import SamplingParams
from opct.sampling.hf_sampler import HFSampler
from opct.sampling.prefix_attention import SharedPrefixLayer, grouped_rows


def test_grouped_rows():
    assert grouped_rows([0, 0, 1, 1, 2, 2]) == 2
    assert grouped_rows([3, 3, 3, 1, 1, 1]) == 3
    assert grouped_rows([0, 1, 2]) is None  # one sample per prompt: nothing shared
    assert grouped_rows([0, 0, 1, 1, 1]) is None  # unequal groups
    assert grouped_rows([0, 0, 1, 1, 0, 0]) is None  # a prompt in two blocks


@pytest.mark.parametrize("arch", ["organism", "organism-qwen3", "organism-gpt2"])
@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_shared_prefix_decoding_gives_the_per_row_cache_samples(arch, temperature, monkeypatch):
    path = resolve_model_path(arch)
    model, tok = AutoModelForCausalLM.from_pretrained(path), load_tokenizer(path)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(10, 200, (n,), generator=g).tolist() for n in (14, 6, 21)]  # left padding differs
    params = SamplingParams(n=3, temperature=temperature, max_new_tokens=24, seed=7)
    updates = {"n": 0}
    real_update = SharedPrefixLayer.update

    def counted(self, *args, **kwargs):
        updates["n"] += 1
        return real_update(self, *args, **kwargs)

    monkeypatch.setattr(SharedPrefixLayer, "update", counted)
    shared = HFSampler(model, tok)
    assert shared.prefix_attention
    got = shared.generate(prompts, params)
    assert updates["n"] > 0  # the shared-prefix path ran
    assert model.config._attn_implementation == "sdpa"  # and was switched back
    copied = HFSampler(model, tok)
    copied.prefix_attention = False
    want = copied.generate(prompts, params)
    assert [r.completion_ids for r in got] == [r.completion_ids for r in want]
    for a, b in zip(got, want, strict=True):
        assert max((abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)), default=0.0) < 5e-5


def test_batches_that_split_a_prompts_samples_use_the_per_row_cache(monkeypatch):
    path = resolve_model_path("organism")
    model, tok = AutoModelForCausalLM.from_pretrained(path), load_tokenizer(path)
    prompts = [[20, 21, 22, 23], [30, 31, 32]]
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=10, seed=2)
    monkeypatch.setattr(SharedPrefixLayer, "__init__", lambda *a, **k: pytest.fail("shared path on split groups"))
    odd = HFSampler(model, tok, batch_size=3).generate(prompts, params)  # 4 rows in batches of 3: [a a b] [b]
    assert [len(r.completion_ids) > 0 for r in odd] == [True] * 4


def test_models_whose_attention_it_does_not_reproduce_keep_the_per_row_cache():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, MistralConfig, MistralForCausalLM

    from opct.sampling.prefix_attention import supports_shared_prefix

    small = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=8)
    plain = MistralForCausalLM(MistralConfig(**small, sliding_window=None, attn_implementation="sdpa"))
    windowed = MistralForCausalLM(MistralConfig(**small, sliding_window=16, attn_implementation="sdpa"))
    local = Gemma3ForCausalLM(Gemma3TextConfig(**small, attn_implementation="sdpa"))  # sliding-window layers
    eager = MistralForCausalLM(MistralConfig(**small, sliding_window=None, attn_implementation="eager"))
    assert supports_shared_prefix(plain)
    assert not supports_shared_prefix(windowed)
    assert not supports_shared_prefix(local)
    assert not supports_shared_prefix(eager)


def test_only_cpu_decoding_uses_it():
    path = resolve_model_path("organism")
    sampler = HFSampler(AutoModelForCausalLM.from_pretrained(path), load_tokenizer(path))
    assert sampler.uses_prefix_attention(torch.device("cpu"))
    assert not sampler.uses_prefix_attention(torch.device("cuda"))  # unmeasured there: the per-row cache stays
    assert not HFSampler(sampler.model, sampler.tokenizer, share_prefix=False).uses_prefix_attention(torch.device("cpu"))
