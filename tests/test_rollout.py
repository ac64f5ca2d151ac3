"""The Hugging Face sampling engine."""

import pytest
import torch

from opct.config import ModelConfig
from opct.models import load_model, load_tokenizer, render_prompt
from opct.sampling.engine import SamplingParams
from opct.sampling.hf_sampler import HFSampler


def _setup(tiny_model):
    tok = load_tokenizer(str(tiny_model))
    return tok, load_model(ModelConfig(name_or_path=str(tiny_model)))


def test_n_samples_logprobs_and_truncation(tiny_model):
    tok, model = _setup(tiny_model)
    prompts = [render_prompt(tok, "hi"), render_prompt(tok, "a longer prompt here")]
    out = HFSampler(model, tok, batch_size=3).generate(prompts, SamplingParams(n=3, max_new_tokens=10, seed=5))
    assert [(r.prompt_index, r.sample_index) for r in out] == [(p, s) for p in range(2) for s in range(3)]
    for r in out:
        assert r.prompt_ids == prompts[r.prompt_index]
        assert len(r.completion_ids) == len(r.logprobs) <= 10
        assert r.truncated == (tok.eos_token_id not in r.completion_ids)
        if not r.truncated:
            assert r.completion_ids[-1] == tok.eos_token_id and tok.eos_token_id not in r.completion_ids[:-1]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([r.prompt_ids + r.completion_ids])).logits[0]
        ref = torch.log_softmax(logits, -1)
        p = len(r.prompt_ids)
        expected = [ref[p - 1 + t, tok_id].item() for t, tok_id in enumerate(r.completion_ids)]
        torch.testing.assert_close(torch.tensor(r.logprobs), torch.tensor(expected), rtol=1e-4, atol=1e-4)


def test_stops_at_eos(tiny_model):
    tok, model = _setup(tiny_model)
    with torch.no_grad():  # make EOS overwhelmingly likely after the first token
        model.lm_head.bias = None
        model.lm_head.weight[tok.eos_token_id] += 50 * model.model.norm.weight.sign()
    out = HFSampler(model, tok).generate([render_prompt(tok, "hi")], SamplingParams(n=4, max_new_tokens=20))
    assert all(r.completion_ids == [tok.eos_token_id] and not r.truncated for r in out)
    forced = HFSampler(model, tok).generate([render_prompt(tok, "hi")], SamplingParams(n=2, max_new_tokens=6, min_new_tokens=4))
    assert all(len(r.completion_ids) >= 4 and tok.eos_token_id not in r.completion_ids[:4] for r in forced)


def test_greedy_is_argmax_and_samples_are_batch_independent(tiny_model):
    tok, model = _setup(tiny_model)
    prompt = render_prompt(tok, "hello")
    (g,) = HFSampler(model, tok).generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=5))
    ids = list(prompt)
    for _ in range(5):
        with torch.no_grad():
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    assert g.completion_ids == ids[len(prompt) :][: len(g.completion_ids)]
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=11)
    other = render_prompt(tok, "a different prompt")
    alone = HFSampler(model, tok, batch_size=1).generate([prompt], params, sample_keys=["k"])
    mixed = HFSampler(model, tok, batch_size=4).generate([other, prompt], params, sample_keys=["z", "k"])
    assert [r.completion_ids for r in alone] == [r.completion_ids for r in mixed[2:]]
    reseeded = HFSampler(model, tok).generate([prompt], SamplingParams(n=2, max_new_tokens=8, seed=12), sample_keys=["k"])
    assert [r.completion_ids for r in reseeded] != [r.completion_ids for r in alone]


def test_top_p_restricts_to_the_nucleus(tiny_model):
    tok, model = _setup(tiny_model)
    prompt = render_prompt(tok, "hello")
    with torch.no_grad():
        first = torch.softmax(model(input_ids=torch.tensor([prompt])).logits[0, -1], -1)
    order = first.argsort(descending=True)
    nucleus = set()
    mass = 0.0
    for t in order.tolist():
        nucleus.add(t)
        mass += first[t].item()
        if mass >= 0.05:
            break
    out = HFSampler(model, tok).generate([prompt], SamplingParams(n=40, top_p=0.05, max_new_tokens=1, seed=3))
    assert {r.completion_ids[0] for r in out} <= nucleus


def test_recorded_logprobs_are_untempered_and_untruncated(tiny_model):
    """As documented on Rollout and in opct.methods.losses: tokens come from the tempered, top-p-truncated
    distribution, but the recorded log-prob is the model's own (T = 1, whole vocabulary)."""
    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    tok, model = _setup(tiny_model)
    prompt = render_prompt(tok, "hello there")
    out = HFSampler(model, tok).generate([prompt], SamplingParams(n=4, temperature=0.5, top_p=0.8, max_new_tokens=8, seed=1))
    batch = CompletionBatch([prompt], [r.completion_ids for r in out], [0] * 4)
    with torch.no_grad():
        untempered, _ = completion_logprobs(model, batch, tok.pad_token_id)
    for i, r in enumerate(out):
        torch.testing.assert_close(untempered[i, : len(r.logprobs)], torch.tensor(r.logprobs), atol=1e-5, rtol=0)


def test_training_at_other_temperatures_warns_once(tiny_model, pairs_file, tmp_path):
    from conftest import run_config

    from opct.config import RunConfig
    from opct.methods.base import OffPolicySamplingWarning
    from opct.training.loop import train

    tree = run_config(tiny_model, pairs_file, tmp_path, **{"train.max_steps": 2, "opct.sampling.temperature": 1.2})
    with pytest.warns(OffPolicySamplingWarning, match="temperature 1.2") as caught:
        train(RunConfig.model_validate(tree), show_progress=False)
    assert len([w for w in caught if w.category is OffPolicySamplingWarning]) == 1


def test_shared_prefix_generation_matches_unshared(tiny_model):
    """Prefilling each prompt once and copying its KV cache to its samples changes nothing sampled."""
    tok, model = _setup(tiny_model)
    prompts = [render_prompt(tok, "hi"), render_prompt(tok, "a much longer prompt, with more words"), render_prompt(tok, "mid")]
    params = SamplingParams(n=3, max_new_tokens=10, seed=4)
    prefill_rows = []
    assert HFSampler(model, tok).uses_prefix_attention(torch.device("cpu"))  # the fast paths' self-checks, once per model
    hook = model.model.register_forward_pre_hook(lambda m, a, kw: prefill_rows.append(kw["input_ids"].shape), with_kwargs=True)
    for batch_size in (64, 5):  # 5: a chunk boundary splits a prompt's samples
        prefill_rows.clear()
        shared = HFSampler(model, tok, batch_size=batch_size).generate(prompts, params)
        if batch_size == 64:  # one forward over the 3 distinct prompts, then 9 rows one position at a time
            assert prefill_rows[0][0] == 3 and prefill_rows[1] == (9, 1)
        plain = HFSampler(model, tok, batch_size=batch_size, share_prefix=False).generate(prompts, params)
        assert [r.completion_ids for r in shared] == [r.completion_ids for r in plain]
        for a, b in zip(shared, plain, strict=True):
            assert a.prompt_ids == b.prompt_ids and a.truncated == b.truncated
            torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), rtol=1e-4, atol=1e-4)
    hook.remove()


def test_inverse_cdf_draws_follow_the_distribution_and_skip_zeros():
    from opct.sampling.token_choice import inverse_cdf

    probs = torch.tensor([[0.0, 0.5, 0.0, 0.2, 0.3, 0.0]]).repeat(20000, 1)
    u = torch.rand(20000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    u[:4] = torch.tensor([0.0, 1.0 - 1e-16, 0.5, 1.0])  # the ends of the unit interval and a boundary
    drawn = inverse_cdf(probs, u)
    assert drawn[3] == 4  # u * total == total (rounding at the top): the last token of non-zero probability
    counts = torch.bincount(drawn, minlength=6).double() / len(drawn)
    assert counts[[0, 2, 5]].sum() == 0
    torch.testing.assert_close(counts, probs[0].double(), atol=0.015, rtol=0)
