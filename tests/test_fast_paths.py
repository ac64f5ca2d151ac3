"""Fast paths used only where their self-check passed (opct/sampling/fast_paths.py); the decode attention's
own cases are in tests/test_prefix_attention.py."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaAttention

from opct.sampling import fast_paths
from opct.sampling.fast_paths import FastPathFallbackWarning, tolerance
from opct.sampling.scoring import CompletionBatch, completion_logits, shares_prefix_scoring


def _llama(**kwargs) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, **kwargs)).eval()


def test_the_tolerance_is_the_dtype_the_model_computes_in():
    model = _llama()
    assert tolerance(model) == 1e-4
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert tolerance(model) == 1e-1
    assert tolerance(model.to(torch.bfloat16)) == 1e-1


class _CacheIgnoringAttention(LlamaAttention):
    """Attention that writes its keys to the cache but reads only the current tokens' (a broken model's code)."""

    def forward(self, hidden_states, position_embeddings, attention_mask=None, cache=None, **kwargs):
        out = super().forward(hidden_states, position_embeddings, attention_mask=None, cache=None, **kwargs)
        if cache is not None:
            shape = (*hidden_states.shape[:-1], -1, self.head_dim)
            cache.update(self.k_proj(hidden_states).view(shape).transpose(1, 2),
                         self.v_proj(hidden_states).view(shape).transpose(1, 2), self.layer_idx)
        return out


def test_scoring_on_a_shared_prompt_is_used_only_where_it_gives_the_whole_sequences_numbers(recwarn):
    fast_paths._SAID.clear()
    batch = CompletionBatch([list(range(10, 30)), list(range(40, 52))], [[5, 6, 7], [8, 9], [11, 12, 13, 14], [15]],
                            [0, 0, 1, 1])
    good = _llama()
    assert shares_prefix_scoring(good, 0)
    assert not [w for w in recwarn if issubclass(w.category, FastPathFallbackWarning)]

    broken = _llama()
    for layer in broken.model.layers:
        layer.self_attn.__class__ = _CacheIgnoringAttention
    with torch.no_grad():
        whole = completion_logits(broken, batch, 0, share_prefix=False)
        with pytest.warns(FastPathFallbackWarning, match="LlamaForCausalLM: shared-prefix scoring is off .*differ"):
            scored = completion_logits(broken, batch, 0, share_prefix=True)
    assert not shares_prefix_scoring(broken, 0)
    torch.testing.assert_close(scored, whole)  # the whole-sequence path ran
