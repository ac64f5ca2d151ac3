"""The static decoder (opct/sampling/static_decoder.py) against the plain one: the same tokens and log-probs
(within 1e-4 in float32) on the organism and on the family matrix, its end-of-sequence check every k steps,
the CUDA graph bookkeeping (with a stand-in capture on the CPU), the fallback, and how ``auto`` resolves."""

from __future__ import annotations

from weakref import WeakKeyDictionary

import pytest
import torch
from conftest import one_thread
from transformers import AutoModelForCausalLM

from opct.config import SamplingConfig
from opct.models import load_tokenizer, resolve_model_path
from opct.sampling import fast_paths, static_decoder
from opct.sampling.cuda_graphs import GraphCapture
from opct.sampling.engine import Rollout, SamplingParams
from opct.sampling.factory import make_sampler
from opct.sampling.fast_paths import DECODER_FLOAT32_TOLERANCE, FastPathFallbackWarning, decoder_disagreement
from opct.sampling.hf_sampler import HFSampler
from opct.sampling.static_decoder import CAPACITY_BUCKET, StaticDecoder, static_capacity, why_not_static
from opct.testing.families import FAMILIES, SLIDING_WINDOW_FAMILIES, family_config

#: Families whose tiny models the static decoder must take (full attention through transformers' interface).
STATIC_FAMILIES = ("llama", "qwen3", "gpt2", "phi3", "olmo2", "gpt_neox", "falcon", "stablelm")


@pytest.fixture(scope="module")
def organism():
    path = resolve_model_path("organism")
    return AutoModelForCausalLM.from_pretrained(path).eval(), load_tokenizer(path)


def _prompts(lengths=(14, 6, 21, 9), seed: int = 1) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(10, 200, (n,), generator=g).tolist() for n in lengths]  # left padding differs per row


def _both(model, tok, params: SamplingParams, prompts=None) -> tuple[list[Rollout], list[Rollout], HFSampler]:
    prompts = prompts or _prompts()
    with one_thread():
        plain = HFSampler(model, tok, decoder="plain").generate(prompts, params)
        static = HFSampler(model, tok, decoder="static")
        return plain, static.generate(prompts, params), static


def _assert_same(plain: list[Rollout], static: list[Rollout]) -> None:
    assert [r.completion_ids for r in static] == [r.completion_ids for r in plain]
    assert [r.truncated for r in static] == [r.truncated for r in plain]
    diff = max(abs(a - b) for s, p in zip(static, plain, strict=True)
               for a, b in zip(s.logprobs, p.logprobs, strict=True))
    assert diff <= DECODER_FLOAT32_TOLERANCE


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(n=3, temperature=1.0, max_new_tokens=40, seed=3),
        SamplingParams(n=2, temperature=0.0, max_new_tokens=20, seed=0),  # greedy
        SamplingParams(n=2, temperature=0.7, top_p=0.8, max_new_tokens=20, seed=5),
        SamplingParams(n=2, temperature=1.0, max_new_tokens=30, min_new_tokens=12, seed=2),
    ],
    ids=["t1", "greedy", "top-p", "min-new-tokens"],
)
def test_the_static_decoder_draws_the_plain_decoders_tokens_on_the_organism(organism, params):
    model, tok = organism
    plain, static, sampler = _both(model, tok, params)
    assert sampler.uses_static_decoder(torch.device("cpu"))  # its self-check passed: the static decoder ran
    _assert_same(plain, static)
    if params.min_new_tokens:
        assert min(len(r.completion_ids) for r in static) >= params.min_new_tokens
    assert any(not r.truncated for r in plain)  # some rows ended early: the end-of-sequence check mattered


def test_checking_the_end_every_step_or_every_k_gives_the_same_rollouts(organism, monkeypatch):
    model, tok = organism
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=48, seed=4)
    prompts = _prompts((5, 9))
    calls = {"n": 0}
    real_forward = StaticDecoder._forward

    def counted(self, buffers):
        calls["n"] += 1
        return real_forward(self, buffers)

    monkeypatch.setattr(StaticDecoder, "_forward", counted)
    runs = {}
    for every in (1, static_decoder.EOS_CHECK_EVERY):
        monkeypatch.setattr(static_decoder, "EOS_CHECK_EVERY", every)
        with one_thread():
            sampler = HFSampler(model, tok, decoder="static")
            sampler.generate(prompts[:1], params)  # its self-check (once per model) runs here, outside the count
            calls["n"] = 0
            runs[every] = (sampler.generate(prompts, params), calls["n"])
    (per_step, steps_1), (per_k, steps_k) = runs[1], runs[static_decoder.EOS_CHECK_EVERY]
    assert [(r.completion_ids, r.logprobs, r.truncated) for r in per_k] == \
           [(r.completion_ids, r.logprobs, r.truncated) for r in per_step]
    longest = max(len(r.completion_ids) for r in per_step)
    assert longest < params.max_new_tokens  # every row ended: the loop stopped early in both
    assert steps_1 < steps_k <= steps_1 + static_decoder.EOS_CHECK_EVERY - 1


def _family_model(family: str, tok):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(family_config(family, tok)).eval()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_family_matrix_decodes_the_plain_decoders_tokens_or_falls_back_with_one_warning(family, organism, recwarn):
    tok = organism[1]
    model = _family_model(family, tok)
    fast_paths._SAID.clear()
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=12, seed=0)
    plain, static, sampler = _both(model, tok, params)
    fallbacks = [w for w in recwarn if issubclass(w.category, FastPathFallbackWarning) and "static decoder" in str(w.message)]
    _assert_same(plain, static)  # the static decoder's tokens, or the plain decoder's after falling back
    if family in STATIC_FAMILIES:
        assert sampler.uses_static_decoder(torch.device("cpu")) and not fallbacks
    if family in SLIDING_WINDOW_FAMILIES:
        assert len(fallbacks) == 1 and "sliding windows" in str(fallbacks[0].message)
    assert sampler.uses_static_decoder(torch.device("cpu")) != bool(fallbacks)


def test_a_static_decoder_that_disagrees_falls_back_once_and_the_plain_decoder_runs(organism, monkeypatch, recwarn):
    model, tok = organism
    fast_paths._SAID.clear()
    monkeypatch.setattr(fast_paths, "_VERDICTS", WeakKeyDictionary())  # this test's verdict, not the module's
    real_load = StaticDecoder._load

    def shifted(buffers, prompt_cache, attention, next_position):  # a broken decoder: positions off by one
        real_load(buffers, prompt_cache, attention, next_position + 1)

    monkeypatch.setattr(StaticDecoder, "_load", staticmethod(shifted))
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=0)
    plain, static, sampler = _both(model, tok, params)
    sampler.generate(_prompts(), params)
    fallbacks = [w for w in recwarn if issubclass(w.category, FastPathFallbackWarning)]
    assert len(fallbacks) == 1 and "static decoder is off" in str(fallbacks[0].message)
    assert not sampler.uses_static_decoder(torch.device("cpu"))
    assert [(r.completion_ids, r.logprobs) for r in static] == [(r.completion_ids, r.logprobs) for r in plain]


def _replaying_capture(step, rewind) -> GraphCapture:
    """A CPU stand-in for CUDA graph capture: warm-up, rewind, "capture" (one more run), and replay re-runs it."""
    step()
    rewind()
    output = step()
    return GraphCapture(lambda: output.copy_(step()), output)


def test_graph_capture_bookkeeping_replays_the_eager_steps_and_shapes_are_reused(organism):
    model, tok = organism
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=24, seed=9)
    plain, _, _ = _both(model, tok, params)
    sampler = HFSampler(model, tok, decoder="static", batch_size=4)  # 8 rows: two batches of one shape a call
    graphs = sampler.static_decoder()
    captured = []

    def counting(step, rewind):
        captured.append(len(graphs._shapes))
        return _replaying_capture(step, rewind)

    graphs.use_graphs, graphs.capture = True, counting
    with one_thread():
        first = sampler.generate(_prompts(), params)
        assert graphs._shapes == {}  # freed when the call ends: no static cache outlives the rollouts
        again = sampler.generate(_prompts(), params)
    _assert_same(plain, first)
    assert [r.logprobs for r in again] == [r.logprobs for r in first]
    assert captured == [1, 1]  # one capture per call: the call's second batch of the same shape replayed it
    assert graphs.use_graphs


def test_autocast_caches_a_trainable_leafs_cast_for_the_rest_of_its_region():
    """The mechanism a captured graph must not depend on: inside one autocast region the cast of a trainable
    float32 weight is cached, so an in-place update of the weight is not seen by later products; with the
    cache off it is. (A graph recorded while the cache is warm reads the cached copy, freed when the region ends.)"""
    weight, x = torch.nn.Parameter(torch.ones(4, 4)), torch.ones(2, 4)
    seen = {}
    for cache in (True, False):
        with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=cache):
            before = torch.mm(x, weight)[0, 0].item()
            with torch.no_grad():
                weight.add_(1.0)
            seen[cache] = (before, torch.mm(x, weight)[0, 0].item())
            with torch.no_grad():
                weight.sub_(1.0)
    assert seen[True] == (4.0, 4.0)  # stale: the cached bfloat16 copy of the old weight
    assert seen[False] == (4.0, 8.0)


def test_graphs_are_recorded_with_autocasts_cast_cache_off(organism, monkeypatch):
    """Full fine-tuning's float32 weights sampled under bfloat16 autocast: the step is recorded with the cast
    cache off (the casts become part of the graph, re-read from the live weights at every replay), in the
    same dtype, and the cache is on again outside the capture."""
    _, tok = organism
    trainable = AutoModelForCausalLM.from_pretrained(resolve_model_path("organism")).eval()
    assert all(p.requires_grad for p in trainable.parameters())
    monkeypatch.setattr(HFSampler, "_check_static", lambda self: None)
    sampler = HFSampler(trainable, tok, decoder="static")
    graphs = sampler.static_decoder()
    recorded = []

    def recording(step, rewind):
        recorded.append((torch.is_autocast_cache_enabled(), torch.get_autocast_dtype("cpu"),
                         torch.is_autocast_enabled("cpu")))
        return _replaying_capture(step, rewind)

    graphs.use_graphs, graphs.capture = True, recording
    with one_thread(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = sampler.generate(_prompts(), SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=3))
        assert torch.is_autocast_cache_enabled()
    assert recorded and all(r == (False, torch.bfloat16, True) for r in recorded), recorded
    assert all(len(r.completion_ids) > 0 for r in out)


def test_a_failed_capture_is_said_once_and_the_steps_run_eagerly(organism, recwarn):
    model, tok = organism
    fast_paths._SAID.clear()
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=24, seed=9)
    plain, _, _ = _both(model, tok, params)
    sampler = HFSampler(model, tok, decoder="static")
    graphs = sampler.static_decoder()

    def failing(step, rewind):
        step()  # the warm-up ran and advanced the cache; the decoder must rewind it
        raise RuntimeError("operation not permitted when stream is capturing")

    graphs.use_graphs, graphs.capture = True, failing
    with one_thread():
        out = sampler.generate(_prompts(), params) + sampler.generate(_prompts(), params)
    said = [w for w in recwarn if issubclass(w.category, FastPathFallbackWarning)]
    assert len(said) == 1 and "CUDA graph decoding is off (RuntimeError: operation not permitted" in str(said[0].message)
    assert not graphs.use_graphs
    _assert_same(plain + plain, out)


def test_auto_is_the_plain_decoder_on_a_cpu_and_the_setting_is_strict(organism, monkeypatch):
    model, tok = organism
    checks = []
    monkeypatch.setattr(fast_paths, "_VERDICTS", WeakKeyDictionary())
    monkeypatch.setattr(HFSampler, "_check_static", lambda self: checks.append(1))
    cpu = torch.device("cpu")
    assert not HFSampler(model, tok).uses_static_decoder(cpu) and not checks  # auto on a CPU: no self-check either
    assert not HFSampler(model, tok, decoder="plain").uses_static_decoder(torch.device("cuda"))
    assert HFSampler(model, tok, decoder="static").uses_static_decoder(cpu) and checks == [1]
    fresh = AutoModelForCausalLM.from_pretrained(resolve_model_path("organism")).eval()
    assert HFSampler(fresh, tok).uses_static_decoder(torch.device("cuda")) and checks == [1, 1]  # auto on CUDA
    with pytest.raises(ValueError, match="unknown decoder 'fast'"):
        HFSampler(model, tok, decoder="fast")
    assert make_sampler(SamplingConfig(decoder="static"), model, tok).decoder == "static"
    assert make_sampler(SamplingConfig(), model, tok).decoder == "auto"
    with pytest.raises(ValueError, match="decoder"):
        SamplingConfig(decoder="fast")
    with pytest.raises(ValueError, match="decoder: static is the hf engine's"):
        SamplingConfig(engine="vllm", decoder="static")


def test_what_the_static_decoder_can_run_and_its_shape_buckets(organism):
    model, tok = organism
    assert why_not_static(model) is None
    assert "sliding windows" in why_not_static(_family_model("mistral", tok))
    model.config._attn_implementation = "flash_attention_2"
    try:
        assert "flash_attention_2" in why_not_static(model)
    finally:
        model.config._attn_implementation = "sdpa"
    assert static_capacity(1, 1) == CAPACITY_BUCKET
    assert static_capacity(30, CAPACITY_BUCKET - 30) == CAPACITY_BUCKET
    assert static_capacity(30, CAPACITY_BUCKET - 29) == 2 * CAPACITY_BUCKET


def _rollouts(tokens: list[list[int]], logprobs: list[list[float]]) -> list[Rollout]:
    return [Rollout(i, 0, [1], t, lp, False) for i, (t, lp) in enumerate(zip(tokens, logprobs, strict=True))]


def test_the_decoder_rule_float32_against_plain_low_precision_against_the_trainer(organism):
    model = organism[0]
    plain = _rollouts([[3, 4], [5]], [[-1.0, -2.0], [-0.5]])
    assert decoder_disagreement(model, plain, _rollouts([[3, 4], [5]], [[-1.0, -2.00009], [-0.5]]), 0.0, 0.0) is None
    assert "other tokens" in decoder_disagreement(model, plain, _rollouts([[3, 4], [6]], [[-1.0, -2.0], [-0.5]]), 0, 0)
    assert "by 2.0e-04 > 1e-04" in decoder_disagreement(model, plain, _rollouts([[3, 4], [5]], [[-1.0, -2.0002], [-0.5]]),
                                                        0.0, 0.0)
    half = AutoModelForCausalLM.from_config(model.config).to(torch.bfloat16)
    other_tokens = _rollouts([[3, 9], [5]], [[-1.0, -3.0], [-0.5]])
    assert decoder_disagreement(half, plain, other_tokens, 3e-2, 5.9e-2) is None  # within twice plain's deviation
    assert "2.0e-02 > 1.6e-02" in decoder_disagreement(half, plain, other_tokens, 1e-3, 2e-2)  # above the floor
    assert decoder_disagreement(half, plain, other_tokens, 0.0, 1.5e-2) is None  # below the floor


def test_two_shapes_are_kept_and_the_least_recently_used_is_dropped(organism):
    model, tok = organism
    sampler = HFSampler(model, tok, decoder="static", batch_size=1)  # one batch per prompt, shortest first
    prompts = _prompts((5, 70, 140))  # with 8 new tokens: capacities 64, 128, 192
    kept = []
    decode = StaticDecoder.decode

    def recording(self, *args):
        decode(self, *args)
        kept.append([key[1] for key in self._shapes])

    StaticDecoder.decode = recording
    try:
        with one_thread():
            sampler.generate(prompts, SamplingParams(n=1, temperature=0.0, max_new_tokens=8, min_new_tokens=8))
    finally:
        StaticDecoder.decode = decode
    assert kept == [[64], [64, 128], [128, 192]]  # two kept within the call, the least recently used dropped
    assert sampler.static_decoder()._shapes == {}  # and none after it


def test_eager_attention_takes_the_static_decoders_float_mask(organism):
    tok = organism[1]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(family_config("llama", tok), attn_implementation="eager").eval()
    assert model.config._attn_implementation == "eager"
    masks = []
    real_load = StaticDecoder._load
    StaticDecoder._load = staticmethod(lambda buffers, *a: masks.append(buffers.mask.dtype) or real_load(buffers, *a))
    try:
        plain, static, sampler = _both(model, tok, SamplingParams(n=2, temperature=1.0, max_new_tokens=12, seed=1))
    finally:
        StaticDecoder._load = staticmethod(real_load)
    assert sampler.uses_static_decoder(torch.device("cpu"))
    assert masks and set(masks) == {torch.float32}  # added to the scores, not a boolean
    _assert_same(plain, static)


def test_inverse_cdf_clamps_on_the_device_and_a_row_of_nan_gets_token_0_not_an_index_past_the_vocabulary():
    """The clamp runs on every row (no host sync): a draw that rounds past the last token lands on the last
    token of positive probability, a finite row is untouched, and a diverged row (NaN) gets token 0, as the
    sampler always gave it, where an index past the vocabulary would crash the log-prob gather."""
    from opct.sampling.token_choice import inverse_cdf

    probs = torch.tensor([[0.2, 0.3, 0.5, 0.0], [0.1, 0.0, 0.9, 0.0], [float("nan")] * 4])
    chosen = inverse_cdf(probs, torch.tensor([0.25, 1.0, 0.5], dtype=torch.float64))
    assert chosen.tolist() == [1, 2, 0]


def test_the_static_cache_stores_a_steps_values_in_the_dtype_it_holds(organism):
    """Under bfloat16 autocast the rotary embedding returns float32 keys while the value projection returns
    bfloat16 values; transformers 5.17 allocates a static layer's values in its keys' dtype, and the step's
    in-place write of a bfloat16 value then failed (found running this file on the GPU image's 5.17): the
    layers now write a step's keys and values cast to the dtypes they hold, as the plain decoder's cache does."""
    model, _ = organism
    decoder = StaticDecoder(model, pad_id=0, eos_ids=[1])
    from transformers import DynamicCache

    prompt = DynamicCache()
    heads, dim = model.config.num_key_value_heads, model.config.hidden_size // model.config.num_attention_heads
    for i in range(model.config.num_hidden_layers):
        prompt.update(torch.randn(2, heads, 5, dim), torch.randn(2, heads, 5, dim), i)  # float32 prompt keys and values
    attention = torch.ones(2, 5, dtype=torch.long)
    buffers = decoder._buffers(prompt, 2, 64, attention.device)
    decoder._load(buffers, prompt, attention, torch.full((2, 1), 5))
    step_k, step_v = torch.randn(2, heads, 1, dim).bfloat16(), torch.randn(2, heads, 1, dim).bfloat16()
    for static in buffers.cache.layers:
        keys, values = static.update(step_k.float(), step_v)  # an autocast step: float32 keys, bfloat16 values
        assert (keys.dtype, values.dtype) == (torch.float32, torch.float32)
        assert torch.equal(values[:, :, 5], step_v[:, :, 0].float())
