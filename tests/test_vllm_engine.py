"""The vLLM sampling engine (opct/sampling/vllm_sampler.py) against a fake of vLLM's offline API.

No GPU and no vLLM here: the fake ``vllm`` of ``tests/fake_vllm/`` stands in for ``vllm.LLM``,
``vllm.SamplingParams`` and ``vllm.lora.request.LoRARequest`` (what it records and what it refuses: its
docstring). Several processes, each with its own engine: ``tests/test_vllm_per_rank.py``.
"""

from __future__ import annotations

import copy
import sys
import types
from typing import Any

import pytest
import torch

from opct.config import RunConfig
from opct.errors import OpctError, describe
from opct.sampling.engine import SamplingParams, sample_seed
from opct.sampling.factory import make_sampler
from opct.sampling.hf_sampler import HFSampler
from opct.sampling.vllm_sampler import VLLMSampler, VLLMUnavailable
from tests.conftest import run_config
from tests.fake_vllm import vllm as fake
from tests.fake_vllm.vllm import lora as fake_lora
from tests.fake_vllm.vllm.lora import request as fake_lora_request

FakeLLM = fake.LLM
EOS, OTHER = fake.EOS, fake.OTHER


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setitem(sys.modules, "vllm.lora", fake_lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", fake_lora_request)
    monkeypatch.delenv("FAKE_VLLM_LOG", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.setenv(key, "unset")  # so that teardown restores the environment exactly
        monkeypatch.delenv(key)
    FakeLLM.instances.clear()
    return fake


def _sampler(**kwargs: Any) -> VLLMSampler:
    return VLLMSampler("some/model", [EOS], **kwargs)


def test_one_request_per_sample_with_its_own_seed_and_rollouts_in_prompt_sample_order(fake_vllm):
    sampler = _sampler()
    prompts = [[10, 11, 12, 13], [20], [30, 31]]  # lengths in no order
    keys = ["pair-b", "pair-a", "pair-c"]
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=6, seed=7)
    rollouts = sampler.generate(prompts, params, sample_keys=keys)

    sent, settings = sampler.llm.calls[-1]
    jobs = [(p, s) for p in range(3) for s in range(2)]
    assert sent == [{"prompt_token_ids": prompts[p]} for p, _ in jobs]
    assert [sp.seed for sp in settings] == [sample_seed(7, keys[p], s) for p, s in jobs]
    assert all(sp.n == 1 for sp in settings)
    assert len({sp.seed for sp in settings}) == 6
    assert [(r.prompt_index, r.sample_index) for r in rollouts] == jobs
    assert [r.prompt_ids for r in rollouts] == [prompts[p] for p, _ in jobs]
    returned = sampler.llm.returned[-1]
    assert [r.completion_ids for r in rollouts] == [out.outputs[0].token_ids for out in returned]


def test_a_sample_does_not_depend_on_the_rest_of_the_batch(fake_vllm):
    sampler = _sampler()
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=8, seed=1)
    alone = sampler.generate([[40, 41]], params, sample_keys=["q"])
    seeds_alone = [sp.seed for sp in sampler.llm.calls[-1][1]]
    mixed = sampler.generate([[50], [40, 41], [60, 61, 62]], params, sample_keys=["x", "q", "y"])
    seeds_mixed = [sp.seed for sp in sampler.llm.calls[-1][1]][3:6]
    assert seeds_alone == seeds_mixed == [sample_seed(1, "q", s) for s in range(3)]
    mine = [r for r in mixed if r.prompt_index == 1]
    assert [r.completion_ids for r in mine] == [r.completion_ids for r in alone]
    assert [r.logprobs for r in mine] == [r.logprobs for r in alone]
    # without keys a prompt's position is its key, as in HFSampler
    sampler.generate([[40, 41], [50]], params)
    assert [sp.seed for sp in sampler.llm.calls[-1][1]][:3] == [sample_seed(1, "0", s) for s in range(3)]


def test_the_completion_keeps_the_eos_and_truncated_means_stopped_at_max_tokens(fake_vllm):
    sampler = _sampler()
    sampler.llm.script = {(5,): [7, 8, EOS, 9, 9], (6,): [7, 8, 9, 10, 11, 12], (7,): [7, 8, 9, EOS]}
    params = SamplingParams(n=1, temperature=1.0, max_new_tokens=3)
    stop, length, late_eos = sampler.generate([[5], [6], [7]], params)
    assert stop.completion_ids == [7, 8, EOS] and not stop.truncated
    assert length.completion_ids == [7, 8, 9] and length.truncated
    assert late_eos.completion_ids == [7, 8, 9] and late_eos.truncated  # its EOS came after max_new_tokens
    assert all(len(r.logprobs) == len(r.completion_ids) for r in (stop, length, late_eos))


def test_logprobs_are_the_sampled_tokens_own(fake_vllm):
    sampler = _sampler()
    rollouts = sampler.generate([[70], [71]], SamplingParams(n=2, temperature=1.0, max_new_tokens=10, seed=3))
    for rollout, out in zip(rollouts, sampler.llm.returned[-1], strict=True):
        steps = out.outputs[0].logprobs
        want = [steps[t][tok].logprob for t, tok in enumerate(rollout.completion_ids)]
        assert rollout.logprobs == want
        assert -0.01 not in rollout.logprobs  # never the other, likelier entry's
    sampler.llm.drop_logprobs = True
    with pytest.raises(RuntimeError, match="log-prob"):
        sampler.generate([[70]], SamplingParams(max_new_tokens=4))


def test_request_and_engine_settings(fake_vllm):
    sampler = VLLMSampler("/models/m", [EOS, 4, EOS], dtype="bfloat16", gpu_memory_utilization=0.4, max_model_len=2048,
                          engine_args={"enforce_eager": True})
    engine = sampler.llm.kwargs
    assert engine["logprobs_mode"] == "raw_logprobs"  # the model's own log-probs, before temperature and top-p
    assert engine["generation_config"] == "vllm"  # nothing from the checkpoint's generation_config
    assert engine["distributed_executor_backend"] == "external_launcher"
    assert (engine["model"], engine["dtype"], engine["gpu_memory_utilization"], engine["max_model_len"]) == (
        "/models/m", "bfloat16", 0.4, 2048)
    assert engine["enforce_eager"] is True
    with pytest.raises(ValueError, match="logprobs_mode"):
        _sampler(engine_args={"logprobs_mode": "processed_logprobs"})

    sampler.generate([[9]], SamplingParams(n=1, temperature=0.0, top_p=0.9, max_new_tokens=12, min_new_tokens=3))
    (greedy,) = sampler.llm.calls[-1][1]
    assert greedy.temperature == 0.0
    assert (greedy.max_tokens, greedy.min_tokens, greedy.top_p) == (12, 3, 0.9)
    assert greedy.stop_token_ids == [EOS, 4] and greedy.ignore_eos is False
    assert greedy.logprobs == 0 and greedy.detokenize is False
    sampler.generate([[9]], SamplingParams(temperature=0.7, top_p=0.8, max_new_tokens=5))
    (tempered,) = sampler.llm.calls[-1][1]
    assert (tempered.temperature, tempered.top_p, tempered.min_tokens) == (0.7, 0.8, 0)


def test_the_engine_runs_in_this_process_as_rank_0_of_1(fake_vllm, monkeypatch):
    _sampler()
    import os

    assert (os.environ["RANK"], os.environ["LOCAL_RANK"], os.environ["WORLD_SIZE"]) == ("0", "0", "1")
    assert int(os.environ["MASTER_PORT"]) > 0
    monkeypatch.setenv("MASTER_PORT", "29533")
    _sampler()
    assert os.environ["MASTER_PORT"] == "29533"  # a launcher's value is kept


def test_without_vllm_or_a_gpu_the_error_says_what_to_do(monkeypatch, fake_vllm):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(VLLMUnavailable, match="CUDA GPU"):
        _sampler()
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with pytest.raises(VLLMUnavailable) as caught:
        _sampler()
    assert isinstance(caught.value, OpctError)
    code, message = describe(caught.value)
    assert code == 2 and "pip install 'opct[vllm]'" in message and "CUDA GPU" in message


def test_the_config_picks_the_engine(fake_vllm, tiny_model, tmp_path):
    from opct.models import eos_token_ids, load_model, load_tokenizer

    tree = run_config(tiny_model, tmp_path / "p.jsonl", tmp_path,
                      **{"opct.sampling.engine": "vllm", "opct.sampling.vllm_engine_args": {"max_model_len": 256}})
    cfg = RunConfig.model_validate(tree)
    model, tok = load_model(cfg.model), load_tokenizer(str(tiny_model))
    sampler = make_sampler(cfg.method_config.sampling, model, tok, cfg.model)
    assert isinstance(sampler, VLLMSampler)
    engine = sampler.llm.kwargs
    assert engine["model"] == str(tiny_model) and engine["dtype"] == "float32"  # the policy's dtype
    assert engine["gpu_memory_utilization"] == 0.3 and engine["max_model_len"] == 256
    assert sampler.eos_ids == eos_token_ids(model, tok)

    hf = RunConfig.model_validate(run_config(tiny_model, tmp_path / "p.jsonl", tmp_path))
    assert hf.method_config.sampling.engine == "hf"
    assert isinstance(make_sampler(hf.method_config.sampling, model, tok, hf.model), HFSampler)
    assert len(FakeLLM.instances) == 1


def test_vllm_keys_with_the_hf_engine_are_refused():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="vllm_gpu_memory_utilization set, but engine is hf"):
        RunConfig.model_validate({"opct": {"sampling": {"vllm_gpu_memory_utilization": 0.5}}})
    with pytest.raises(ValidationError, match="engine"):
        RunConfig.model_validate({"opct": {"sampling": {"engine": "sglang"}}})
    with pytest.raises(ValidationError, match="vllm_engine_args set, but engine is hf"):
        RunConfig.model_validate({"opct": {"sampling": {"vllm_engine_args": {"max_model_len": 4096}}}})
    for sampling in ({"engine": "vllm", "vllm_engine_args": {"max_model_len": 4096}}, {}):
        cfg = RunConfig.model_validate({"opct": {"sampling": sampling}})
        again = RunConfig.model_validate(cfg.model_dump(mode="json"))  # a manifest's config reads back
        assert again.method_config.sampling == cfg.method_config.sampling


def test_bct_target_cache_key_is_unchanged_with_the_hf_engine():
    from opct.config import GenerationConfig
    from opct.methods.bct import BCTMethod

    def settings(section: dict) -> dict:
        method = BCTMethod.__new__(BCTMethod)
        method.settings = RunConfig.model_validate({"method": "bct", "bct": {"targets": section}}).method_config
        return method._target_settings()

    before = GenerationConfig(n=1, temperature=0.0, max_new_tokens=1024).model_dump(exclude={"sequences_per_call"})
    assert settings({}) == before  # the key a cache made before engines were a setting has
    assert settings({"engine": "vllm", "vllm_gpu_memory_utilization": 0.6}) == {**before, "engine": "vllm"}


def _lora_policy(tiny_model):
    from opct.config import LoraConfig, ModelConfig
    from opct.models import add_lora, load_model

    policy = add_lora(load_model(ModelConfig(name_or_path=str(tiny_model))), LoraConfig(r=4, alpha=8))
    torch.manual_seed(0)
    with torch.no_grad():  # an adapter that is not zero, as after some training
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05)
    return policy


def test_weight_sync_pushes_the_merged_policy_under_the_base_models_names(fake_vllm, tiny_model):
    from transformers import AutoModelForCausalLM

    policy = _lora_policy(tiny_model)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    sampler = _sampler()
    sampler.load_policy_weights(policy)

    (pushed,) = sampler.llm.model.loads
    base = AutoModelForCausalLM.from_pretrained(tiny_model).state_dict()
    assert set(pushed) == set(base)  # the base model's names: no base_model.model., .base_layer or lora_ entries
    merged = copy.deepcopy(policy).merge_and_unload().state_dict()  # peft's own merge, on a copy
    assert all(torch.allclose(pushed[n], merged[n], atol=1e-6) for n in base)
    changed = {n for n in base if not torch.equal(pushed[n], base[n])}
    assert changed and all(n.endswith("_proj.weight") for n in changed)  # the adapted weights, merged
    assert all(torch.equal(before[n], p) for n, p in policy.named_parameters())  # the training model is untouched
    assert sampler.llm.events == ["load_weights", "reset_prefix_cache"]

    plain = AutoModelForCausalLM.from_pretrained(tiny_model)
    sampler.load_policy_weights(plain)
    assert set(sampler.llm.model.loads[-1]) == set(base)


@pytest.fixture
def fresh_accelerate_state():
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def _opct_context(tiny_model, tmp_path, **overrides):
    from accelerate import Accelerator

    from opct.methods.base import TrainContext
    from opct.models import add_lora, load_model, load_tokenizer, make_teacher

    tree = run_config(tiny_model, tmp_path / "p.jsonl", tmp_path, **{"opct.sampling.engine": "vllm", **overrides})
    cfg = RunConfig.model_validate(tree)
    policy = add_lora(load_model(cfg.model), cfg.lora)
    return TrainContext(cfg=cfg, accelerator=Accelerator(cpu=True), model=policy, policy=policy,
                        tokenizer=load_tokenizer(str(tiny_model)), teacher=make_teacher(policy), run_dir=tmp_path)


def _adapter_of(policy: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The policy's LoRA tensors under the names PEFT saves them with (no adapter name)."""
    return {n.replace(".default.", "."): p.detach().clone() for n, p in policy.named_parameters() if "lora_" in n}


def test_opct_pushes_the_adapter_not_merged_weights_and_sleeps_between_steps(fake_vllm, tiny_model, tmp_path,
                                                                           fresh_accelerate_state):
    from opct.methods.opct import OPCTMethod
    from opct.pairs import ConsistencyPair

    ctx = _opct_context(tiny_model, tmp_path)
    method = OPCTMethod(ctx)
    assert isinstance(method.sampler, VLLMSampler)
    llm = method.sampler.llm
    assert llm.kwargs["enable_lora"] is True and llm.kwargs["max_lora_rank"] == 8  # r = 4: vLLM's smallest rank >= 4
    assert llm.kwargs["enable_sleep_mode"] is True
    msgs = [{"role": "user", "content": "What is 2 + 2?"}]
    pairs = [ConsistencyPair("p0", msgs, msgs), ConsistencyPair("p1", msgs, msgs)]
    first = method.prepare(pairs, step=0)
    pushed_first = _adapter_of(ctx.policy)
    with torch.no_grad():  # an optimizer step
        for name, p in ctx.policy.named_parameters():
            if "lora_B" in name:
                p.add_(0.1)
    method.prepare(pairs, step=1)

    # the adapter travels, never full weights; the engine sleeps from each generation to the next step's
    assert llm.model.loads == []
    assert llm.events == ["generate+lora1", "sleep(1)", "wake_up(kv_cache,weights)", "generate+lora2", "sleep(1)"]
    old, new = llm.adapters
    assert (old["id"], new["id"], old["r"]) == (1, 2, 4)
    for adapter, policy in ((old, pushed_first), (new, _adapter_of(ctx.policy))):
        assert set(adapter["tensors"]) == set(policy)
        assert all(torch.equal(adapter["tensors"][n], policy[n]) for n in policy)
    assert any(not torch.equal(old["tensors"][n], new["tensors"][n]) for n in old["tensors"])  # step 2 samples the updated policy
    assert sum(len(mb.completions) for mb in first) == 2 * 2  # n = 2 samples of each pair
    assert all(mb.sampler_logprobs is not None for mb in first)
    seeds = [sp.seed for sp in llm.calls[0][1]]
    assert seeds == [sample_seed(ctx.cfg.seed * 1_000_003, pid, s) for pid in ("p0", "p1") for s in range(2)]


def test_an_adapter_sampled_again_after_a_sleep_is_re_added_under_a_new_id(fake_vllm, tiny_model, tmp_path,
                                                                         fresh_accelerate_state):
    """vLLM has been reported to drop loaded adapters in sleep and serve their id with the base model (the fake
    does so); two generations from one pushed adapter (the validation sampler's case) both carry it."""
    from opct.methods.opct import OPCTMethod

    ctx = _opct_context(tiny_model, tmp_path)
    sampler = OPCTMethod(ctx).sampler
    llm = sampler.llm
    sampler.load_policy_weights(ctx.policy)
    params = SamplingParams(n=1, temperature=1.0, max_new_tokens=4)
    sampler.generate([[5, 6, 7]], params)
    sampler.generate([[5, 6, 7]], params)  # no push between: the same adapter, after a sleep
    assert llm.events == ["generate+lora1", "sleep(1)", "wake_up(kv_cache,weights)", "generate+lora2", "sleep(1)"]
    first, second = llm.adapters
    assert not first["served_without_adapter"] and not second["served_without_adapter"]
    assert all(torch.equal(first["tensors"][n], second["tensors"][n]) for n in first["tensors"])
    sampler.load_policy_weights(ctx.policy)  # a push after a served adapter: a new folder and id, not re-added twice
    sampler.generate([[5, 6, 7]], params)
    assert llm.events[-2:] == ["generate+lora3", "sleep(1)"] and not llm.adapters[-1]["served_without_adapter"]


def test_full_weights_are_pushed_awake_and_dropped_by_a_deep_sleep(fake_vllm, tiny_model):
    from transformers import AutoModelForCausalLM

    policy = AutoModelForCausalLM.from_pretrained(tiny_model)
    sampler = _sampler()
    params = SamplingParams(n=1, max_new_tokens=3)
    sampler.generate([[5]], params)  # the weights it was built with: never pushed, so kept through sleep (level 1)
    sampler.load_policy_weights(policy)
    sampler.generate([[5]], params)
    sampler.load_policy_weights(policy)
    sampler.generate([[5]], params)
    assert sampler.llm.events == [
        "generate", "sleep(1)",
        "wake_up(weights)", "load_weights", "wake_up(kv_cache)", "generate", "sleep(2)",  # pushed: dropped in sleep
        "wake_up(weights)", "load_weights", "wake_up(kv_cache)", "generate", "sleep(2)",
    ]
    assert set(sampler.llm.model.loads[-1]) == set(policy.state_dict())
    with pytest.raises(RuntimeError, match="dropped by its last sleep"):
        sampler.generate([[5]], params)  # no push since the deep sleep


def test_sleep_mode_can_be_turned_off(fake_vllm):
    sampler = _sampler(engine_args={"enable_sleep_mode": False})
    sampler.generate([[5]], SamplingParams(n=1, max_new_tokens=3))
    sampler.generate([[5]], SamplingParams(n=1, max_new_tokens=3))
    assert sampler.llm.events == ["generate", "generate"]
    with pytest.raises(ValueError, match="enable_lora"):
        _sampler(engine_args={"enable_lora": False})


def test_vllm_is_accepted_with_several_processes_and_refuses_merged_lora_sampling(fake_vllm, tiny_model, tmp_path,
                                                                                fresh_accelerate_state):
    from opct.config import ConfigError
    from opct.methods.opct import OPCTMethod

    with pytest.raises(ConfigError, match="merged_lora_sampling"):
        OPCTMethod(_opct_context(tiny_model, tmp_path, **{"train.merged_lora_sampling": True}))
    assert FakeLLM.instances == []  # refused before any engine was built
    ctx = _opct_context(tiny_model, tmp_path)
    ctx.accelerator = types.SimpleNamespace(num_processes=2)
    assert isinstance(OPCTMethod(ctx).sampler, VLLMSampler)  # one engine in this process, as in each of the others
