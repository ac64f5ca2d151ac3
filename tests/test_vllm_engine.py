"""The vLLM engine against a fake of vLLM's API (no GPU here): the protocol, the request settings, the
weight push. What vLLM itself does is unverified on this machine."""

from __future__ import annotations

import math
import sys
import types
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
import torch
from peft import LoraConfig, get_peft_model
from pydantic import ValidationError
from transformers import AutoModelForCausalLM

from opct.config import RunConfig
from opct.models import resolve_model_path
from opct.rollout import SamplingParams, sample_seed
from opct.vllm_engine import VLLMSampler, VLLMUnavailable
from tests.conftest import run_config

EOS = 2


@dataclass
class _Logprob:
    logprob: float


@dataclass
class _Completion:
    token_ids: list[int]
    logprobs: list[dict[int, _Logprob]]
    finish_reason: str


@dataclass
class _Output:
    outputs: list[_Completion]


@dataclass
class _Params:
    kwargs: dict[str, Any] = field(default_factory=dict)


class _FakeLLM:
    """Deterministic per request: the seed picks the tokens, so a sample depends on nothing else."""

    instances: ClassVar[list[_FakeLLM]] = []

    def __init__(self, **kwargs: Any):
        self.kwargs, self.calls, self.rpcs, self.resets = kwargs, [], [], 0
        _FakeLLM.instances.append(self)

    def generate(self, requests: list[dict], settings: list[_Params], use_tqdm: bool = True) -> list[_Output]:
        self.calls.append((requests, settings))
        out = []
        for req, sp in zip(requests, settings, strict=True):
            k = sp.kwargs
            g = torch.Generator().manual_seed(k["seed"])
            ids = [int(t) for t in torch.randint(5, 50, (k["max_tokens"],), generator=g)]
            stop = next((i for i, t in enumerate(ids) if i >= k["min_tokens"] and t % 7 == 0), None)
            if stop is not None:
                ids = [*ids[:stop], EOS]
            lps = [{t: _Logprob(-0.1 * (i + 1) - len(req["prompt_token_ids"]) / 100)} for i, t in enumerate(ids)]
            out.append(_Output([_Completion(ids, lps, "stop" if stop is not None else "length")]))
        return out

    def collective_rpc(self, method: Any, args: tuple = ()) -> list[Any]:
        self.rpcs.append((method, args))
        return []

    def reset_prefix_cache(self) -> None:
        self.resets += 1


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    mod = types.ModuleType("vllm")
    mod.LLM = _FakeLLM
    mod.SamplingParams = lambda **kw: _Params(kw)
    monkeypatch.setitem(sys.modules, "vllm", mod)
    _FakeLLM.instances.clear()
    return mod


def _sampler() -> VLLMSampler:
    return VLLMSampler("/models/x", [EOS], gpu_memory_utilization=0.4)


def test_the_engine_asks_for_raw_log_probs_and_the_given_settings(fake_vllm):
    _sampler()
    kw = _FakeLLM.instances[-1].kwargs
    assert kw["logprobs_mode"] == "raw_logprobs"  # the policy's own distribution, before temperature / top-p
    assert kw["model"] == "/models/x" and kw["gpu_memory_utilization"] == 0.4


def test_rollouts_follow_the_protocol(fake_vllm):
    s = _sampler()
    prompts = [[10, 11, 12], [20, 21]]
    params = SamplingParams(n=3, temperature=0.7, top_p=0.9, max_new_tokens=12, min_new_tokens=2, seed=4)
    out = s.generate(prompts, params, sample_keys=["a", "b"])
    assert [(r.prompt_index, r.sample_index) for r in out] == [(p, i) for p in range(2) for i in range(3)]
    requests, settings = _FakeLLM.instances[-1].calls[-1]
    assert [r["prompt_token_ids"] for r in requests] == [prompts[0]] * 3 + [prompts[1]] * 3
    assert [sp.kwargs["seed"] for sp in settings] == [sample_seed(4, k, i) for k in "ab" for i in range(3)]
    first = settings[0].kwargs
    assert (first["temperature"], first["top_p"], first["max_tokens"], first["min_tokens"]) == (0.7, 0.9, 12, 2)
    assert first["n"] == 1 and first["stop_token_ids"] == [EOS] and first["logprobs"] == 0 and not first["ignore_eos"]
    for r in out:
        assert len(r.logprobs) == len(r.completion_ids) > 0 and all(lp < 0 for lp in r.logprobs)
        assert r.truncated == (r.completion_ids[-1] != EOS)
        assert r.truncated or len(r.completion_ids) > 2  # min_new_tokens before EOS
    assert {r.truncated for r in out} == {True, False}  # the fake stops some samples at EOS, not others


def test_a_sample_does_not_depend_on_its_batch(fake_vllm):
    s = _sampler()
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=10, seed=1)
    alone = s.generate([[7, 8, 9]], params, sample_keys=["x"])
    batched = s.generate([[1, 2], [7, 8, 9]], params, sample_keys=["y", "x"])
    assert [r.completion_ids for r in alone] == [r.completion_ids for r in batched[2:]]


def test_greedy_is_temperature_zero(fake_vllm):
    s = _sampler()
    s.generate([[3, 4]], SamplingParams(n=1, temperature=0.0, max_new_tokens=4))
    assert _FakeLLM.instances[-1].calls[-1][1][0].kwargs["temperature"] == 0.0


def test_a_log_prob_missing_for_a_token_is_an_error(fake_vllm, monkeypatch):
    s = _sampler()
    monkeypatch.setattr(_FakeLLM, "generate", lambda self, r, p, use_tqdm=True: [
        _Output([_Completion([5, 6], [{5: _Logprob(-1.0)}], "length")])])
    with pytest.raises(RuntimeError, match="1 log-probs for 2 tokens"):
        s.generate([[1]], SamplingParams(max_new_tokens=2))


def test_without_vllm_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with pytest.raises(VLLMUnavailable, match=r"pip install 'opct\[vllm\]'"):
        _sampler()


def test_weight_push_sends_the_merged_policy_under_the_base_names(fake_vllm):
    base = AutoModelForCausalLM.from_pretrained(resolve_model_path("organism"))
    names = {n for n, _ in base.named_parameters()}
    policy = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():
        for n, p in policy.named_parameters():
            if "lora_B" in n:
                p.fill_(0.01)
    s = _sampler()
    s.load_policy_weights(policy)
    llm = _FakeLLM.instances[-1]
    (method, (weights,)), = llm.rpcs
    assert {n for n, _ in weights} == names and llm.resets == 1
    loaded: dict[str, torch.Tensor] = {}
    worker = types.SimpleNamespace(model_runner=types.SimpleNamespace(model=types.SimpleNamespace(
        load_weights=lambda weights: loaded.update(dict(weights)))))
    method(worker, weights)  # what vLLM's worker runs
    q = "model.layers.0.self_attn.q_proj.weight"
    layer = policy.base_model.model.model.layers[0].self_attn.q_proj
    want = layer.base_layer.weight + layer.get_delta_weight("default")
    assert torch.allclose(loaded[q], want) and not torch.equal(loaded[q], layer.base_layer.weight)
    assert math.isclose(float(loaded["model.embed_tokens.weight"].sum()), float(base.model.embed_tokens.weight.detach().sum()))
    with torch.no_grad():  # a later step pushes the updated adapter
        layer.lora_B["default"].weight.fill_(0.02)
    s.load_policy_weights(policy)
    (_, (again,)) = llm.rpcs[-1]
    assert torch.allclose(dict(again)[q], layer.base_layer.weight + layer.get_delta_weight("default"))


def test_the_config_chooses_the_engine(tiny_model, pairs_file, tmp_path):
    cfg = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path, **{"train.rollout_engine": "vllm"}))
    assert cfg.train.rollout_engine == "vllm"
    with pytest.raises(ValidationError, match="rollout_engine"):
        RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path, **{"train.rollout_engine": "sglang"}))
    with pytest.raises(ValidationError, match="merged_lora_sampling is for rollout_engine: hf"):
        RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path, **{
            "train.rollout_engine": "vllm", "train.merged_lora_sampling": True}))


def test_an_opct_run_samples_through_vllm_and_pushes_weights_every_step(fake_vllm, tiny_model, pairs_file, tmp_path,
                                                                        monkeypatch):
    """The training loop with rollout_engine: vllm (the fake's tokens, recorded log-probs) runs and pushes
    the policy before every step's sampling."""
    from opct.train import train

    cfg = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path, **{
        "train.rollout_engine": "vllm", "train.max_steps": 2, "train.checkpoint_every": 10}))
    train(cfg, show_progress=False)
    llm = _FakeLLM.instances[-1]
    assert len(llm.rpcs) == 2 and llm.resets == 2 and len(llm.calls) == 2
    assert llm.kwargs["model"] == str(tiny_model)
