"""The grouped-query decode attention (opct/sampling/grouped_query_attention.py): the same function as
attending with repeated keys, no copy of the cache, and the static decoder's rollouts unchanged with it on."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import one_thread
from transformers import AutoModelForCausalLM

from opct.models import load_tokenizer, resolve_model_path
from opct.sampling import grouped_query_attention as gqa
from opct.sampling import static_decoder
from opct.sampling.engine import SamplingParams
from opct.sampling.fast_paths import DECODER_FLOAT32_TOLERANCE
from opct.sampling.hf_sampler import HFSampler
from opct.testing.families import family_config


def _repeated(query, key, value, mask, scale):
    """Reference: the keys and values repeated to every head (what repeat_kv does), then SDPA."""
    rep = query.shape[1] // key.shape[1]
    out = F.scaled_dot_product_attention(query, key.repeat_interleave(rep, 1), value.repeat_interleave(rep, 1),
                                         attn_mask=mask, scale=scale)
    return out.transpose(1, 2)


@pytest.mark.parametrize("q_len", [1, 3])
@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_folding_the_query_heads_is_attention_with_repeated_keys(q_len, mask_kind):
    g = torch.Generator().manual_seed(0)
    rows, heads, kv, length, dim = 3, 8, 2, 11, 16
    query = torch.randn(rows, heads, q_len, dim, generator=g)
    key, value = torch.randn(rows, kv, length, dim, generator=g), torch.randn(rows, kv, length, dim, generator=g)
    allowed = torch.rand(rows, 1, q_len, length + 5, generator=g) > 0.3  # wider than the keys: sliced as SDPA's is
    allowed[..., 0] = True
    mask = allowed if mask_kind == "bool" else torch.where(allowed, 0.0, torch.finfo(torch.float32).min)
    out, weights = gqa.grouped_query_attention(torch.nn.Module(), query, key, value, mask, scaling=0.3)
    assert weights is None and out.shape == (rows, q_len, heads, dim)
    torch.testing.assert_close(out, _repeated(query, key, value, mask[..., :length], 0.3), atol=1e-6, rtol=1e-5)


def test_what_it_does_not_fold_goes_to_transformers_sdpa(monkeypatch):
    seen = []
    monkeypatch.setattr(gqa, "sdpa_attention_forward", lambda *a, **k: seen.append(k) or ("sdpa", None))
    q, k = torch.randn(1, 4, 1, 8), torch.randn(1, 2, 5, 8)
    mask = torch.ones(1, 1, 1, 5, dtype=torch.bool)
    for kwargs in ({"attention_mask": None}, {"attention_mask": mask, "sliding_window": 4},
                   {"attention_mask": mask, "dropout": 0.1}):
        assert gqa.grouped_query_attention(torch.nn.Module(), q, k, k, **kwargs)[0] == "sdpa"
    assert gqa.grouped_query_attention(torch.nn.Module(), torch.randn(1, 2, 1, 8), k, k, mask)[0] == "sdpa"  # no groups
    assert len(seen) == 4


def test_the_static_decoder_with_grouped_attention_draws_the_plain_decoders_tokens_without_repeat_kv(monkeypatch):
    """Forced on (as on transformers 5.17, where SDPA repeats the keys under a mask): every layer's decode step
    goes through the folded attention, transformers' repeat_kv is never called, and the rollouts are the plain
    decoder's within the float32 rule."""
    tok = load_tokenizer(resolve_model_path("organism"))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(family_config("qwen3", tok), attn_implementation="sdpa").eval()
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    real_configs = gqa.grouped_query_configs
    monkeypatch.setattr(static_decoder, "grouped_query_configs", lambda m: real_configs(m, native=False))
    calls = []
    real = gqa.grouped_query_attention
    monkeypatch.setitem(gqa.AttentionInterface._global_mapping, gqa.NAME,
                        lambda module, query, *a, **k: calls.append(query.shape[2]) or real(module, query, *a, **k))
    from transformers.integrations import sdpa_attention

    repeated = []
    real_repeat = sdpa_attention.repeat_kv
    monkeypatch.setattr(sdpa_attention, "repeat_kv", lambda h, n: repeated.append(n) or real_repeat(h, n))
    in_steps = []  # repeat_kv calls made inside the static decoder's steps (prompt encoding may make its own)
    real_forward = static_decoder.StaticDecoder._forward

    def step_forward(self, buffers):
        before = len(repeated)
        out = real_forward(self, buffers)
        in_steps.append(len(repeated) - before)
        return out

    monkeypatch.setattr(static_decoder.StaticDecoder, "_forward", step_forward)
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=12, seed=0, min_new_tokens=12)
    prompts = [[5, 9, 13, 40], [7, 8], [30, 31, 32, 33, 34, 35]]
    with one_thread():
        plain = HFSampler(model, tok, decoder="plain").generate(prompts, params)
        sampler = HFSampler(model, tok, decoder="static")
        static = sampler.generate(prompts, params)
    assert sampler.uses_static_decoder(torch.device("cpu"))
    assert calls and set(calls) == {1} and len(calls) == len(in_steps) * model.config.num_hidden_layers
    assert in_steps and set(in_steps) == {0}  # the static decoder's steps never repeated the keys
    assert [r.completion_ids for r in static] == [r.completion_ids for r in plain]
    assert max(abs(a - b) for s, p in zip(static, plain, strict=True)
               for a, b in zip(s.logprobs, p.logprobs, strict=True)) <= DECODER_FLOAT32_TOLERANCE
    assert model.config._attn_implementation == "sdpa"  # switched back after decoding


def test_nothing_is_switched_where_transformers_folds_the_query_itself_or_there_are_no_groups():
    tok = load_tokenizer(resolve_model_path("organism"))
    qwen3 = AutoModelForCausalLM.from_config(family_config("qwen3", tok), attn_implementation="sdpa")
    assert gqa.grouped_query_configs(qwen3, native=True) == []
    assert gqa.grouped_query_configs(qwen3, native=False) == [qwen3.config]
    organism = AutoModelForCausalLM.from_pretrained(resolve_model_path("organism"))  # 3 heads, 3 key/value heads
    assert gqa.grouped_query_configs(organism, native=False) == []
