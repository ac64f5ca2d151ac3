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
    sampler = HFSampler(model, tok, batch_size=3)
    assert sampler.uses_prefix_attention(torch.device("cpu"))  # its self-check passed (and built shared layers)
    monkeypatch.setattr(SharedPrefixLayer, "__init__", lambda *a, **k: pytest.fail("shared path on split groups"))
    odd = sampler.generate(prompts, params)  # 4 rows in batches of 3: [a a b] [b]
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


def _hand_written_llama():
    """A tiny Llama whose attention modules compute SDPA themselves, never asking the attention interface
    (as Falcon's do): switched to the shared-prefix name they still run, on the generated keys alone."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.models.llama.modeling_llama import LlamaAttention, apply_rotary_pos_emb

    class HandWrittenAttention(LlamaAttention):
        def forward(self, hidden_states, position_embeddings, attention_mask=None, cache=None, **kwargs):
            shape = (*hidden_states.shape[:-1], -1, self.head_dim)
            q, k, v = (proj(hidden_states).view(shape).transpose(1, 2) for proj in (self.q_proj, self.k_proj, self.v_proj))
            q, k = apply_rotary_pos_emb(q, k, *position_embeddings)
            if cache is not None:
                k, v = cache.update(k, v, self.layer_idx)
            out, _ = sdpa_attention_forward(self, q, k, v, attention_mask, scaling=self.scaling)
            return self.o_proj(out.reshape(*hidden_states.shape[:-1], -1)), None

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, attn_implementation="sdpa"))
    for layer in model.model.layers:
        layer.self_attn.__class__ = HandWrittenAttention
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # sharp distributions, so that a wrong attention shows in the log-probs
    return model.eval()


class _Tokenizer:
    pad_token_id, eos_token_id = 0, 1


def test_a_model_whose_attention_ignores_the_interface_falls_back(recwarn):
    from opct.sampling import fast_paths
    from opct.sampling.fast_paths import FastPathFallbackWarning
    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    fast_paths._SAID.clear()
    model = _hand_written_llama()
    sampler = HFSampler(model, _Tokenizer())
    assert sampler.prefix_attention  # its config alone says SDPA, plain full attention
    prompts = [list(range(5, 25)), list(range(40, 52))]
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=8, seed=4)
    jobs = [(p, s) for p in range(2) for s in range(3)]
    # forced, the fast path would record log-probs of another distribution than the model's, without an error
    forced = sampler._generate_batch([prompts[p] for p, _ in jobs], jobs, list(range(6)), params, fast=(True, True))
    batch = CompletionBatch(prompts, [r.completion_ids for r in forced], [r.prompt_index for r in forced])
    with torch.no_grad():
        plain, _ = completion_logprobs(model, batch, 0, share_prefix=False)
    assert max(abs(plain[i, : len(r.logprobs)] - torch.tensor(r.logprobs)).max().item() for i, r in enumerate(forced)) > 1e-2

    assert not sampler.uses_prefix_attention(torch.device("cpu"))  # the check on the modules turns it off
    assert sampler.shares_prefill()  # the shared prefill goes through the model's own attention: its check passes
    said = [w for w in recwarn if issubclass(w.category, FastPathFallbackWarning)]
    assert len(said) == 1 and "2 of 2 attention modules (HandWrittenAttention) do not dispatch" in str(said[0].message)
    rollouts = sampler.generate(prompts, params)
    batch = CompletionBatch(prompts, [r.completion_ids for r in rollouts], [r.prompt_index for r in rollouts])
    with torch.no_grad():
        plain, _ = completion_logprobs(model, batch, 0, share_prefix=False)
    for i, r in enumerate(rollouts):
        torch.testing.assert_close(plain[i, : len(r.logprobs)], torch.tensor(r.logprobs), atol=1e-5, rtol=0)
    HFSampler(_hand_written_llama(), _Tokenizer()).uses_prefix_attention(torch.device("cpu"))  # another of its kind
    assert len([w for w in recwarn if issubclass(w.category, FastPathFallbackWarning)]) == 1  # said once


def _raising_llama():
    """A tiny Llama whose attention modules raise a TypeError under the shared-prefix attention's name, by
    construction (as Falcon's hand-written attention did under transformers 5.0-5.24): whatever transformers
    does, the shared-prefix path raises on it and the plain SDPA path runs."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaAttention

    from opct.sampling.prefix_attention import NAME

    class RaisingAttention(LlamaAttention):
        def forward(self, *args, **kwargs):
            if self.config._attn_implementation == NAME:
                raise TypeError(f"RaisingAttention has no {NAME} implementation")
            return super().forward(*args, **kwargs)

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, attn_implementation="sdpa"))
    for layer in model.model.layers:
        layer.self_attn.__class__ = RaisingAttention
    return model.eval()


def _assert_rollouts_are_the_plain_forwards(model, prompts, rollouts):
    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    batch = CompletionBatch(prompts, [r.completion_ids for r in rollouts], [r.prompt_index for r in rollouts])
    with torch.no_grad():
        plain, _ = completion_logprobs(model, batch, 0, share_prefix=False)
    for i, r in enumerate(rollouts):
        assert len(r.logprobs) == len(r.completion_ids) > 0
        torch.testing.assert_close(plain[i, : len(r.logprobs)], torch.tensor(r.logprobs), atol=1e-5, rtol=0)


def test_a_fast_path_that_raises_falls_back():
    """An attention that raises under the shared-prefix name: the self-check turns the path off, says why once,
    and sampling runs on the per-row cache with the plain forward's log-probs."""
    from opct.sampling import fast_paths
    from opct.sampling.fast_paths import FastPathFallbackWarning

    fast_paths._SAID.clear()
    model = _raising_llama()
    sampler = HFSampler(model, _Tokenizer())
    assert sampler.prefix_attention  # its config alone says SDPA, plain full attention
    with pytest.warns(FastPathFallbackWarning, match="shared-prefix decode attention is off .*TypeError"):
        assert not sampler.uses_prefix_attention(torch.device("cpu"))
    assert model.config._attn_implementation == "sdpa"  # switched back after the failed check
    prompts = [list(range(5, 25)), list(range(40, 52))]
    _assert_rollouts_are_the_plain_forwards(model, prompts, sampler.generate(prompts, SamplingParams(n=2, max_new_tokens=6, seed=1)))


def test_falcon_samples_its_own_distribution_on_whichever_path_its_self_check_picks():
    """Falcon's attention is hand-written (it reads ``config._attn_implementation`` itself): whether the shared-prefix
    path passes its self-check depends on the transformers version (it raised before 5.25). Either way the
    rollouts must carry the plain forward's log-probs."""
    from transformers import FalconConfig, FalconForCausalLM

    torch.manual_seed(0)
    model = FalconForCausalLM(FalconConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                           new_decoder_architecture=True, num_kv_heads=2, alibi=False)).eval()
    sampler = HFSampler(model, _Tokenizer())
    sampler.uses_prefix_attention(torch.device("cpu"))  # whichever verdict: a fallback only warns
    prompts = [list(range(5, 25)), list(range(40, 52))]
    _assert_rollouts_are_the_plain_forwards(model, prompts, sampler.generate(prompts, SamplingParams(n=2, max_new_tokens=6, seed=1)))
