"""Merged-LoRA sampling (opct/sampling/merged_lora.py): the same policy, shared tensors, the training model untouched."""

from __future__ import annotations

import json

import pytest
import torch
from peft import LoraConfig, get_peft_model
from pydantic import ValidationError
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from opct.config import RunConfig
from opct.models import load_tokenizer, resolve_model_path
from opct.sampling.engine import SamplingParams
from opct.sampling.hf_sampler import HFSampler
from opct.sampling.merged_lora import MergedLoraModel
from opct.training.loop import train
from tests.conftest import run_config


def _lora(arch: str) -> torch.nn.Module:
    base = AutoModelForCausalLM.from_pretrained(resolve_model_path(f"organism-{arch}" if arch != "llama" else "organism"))
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", lora_dropout=0.0))
    torch.manual_seed(0)
    with torch.no_grad():  # an adapter that is not zero, as after some training
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.02)
    return model.eval()


@pytest.mark.parametrize("arch", ["llama", "qwen3", "gpt2"])
def test_merged_copy_computes_the_adapter_and_shares_every_other_tensor(arch):
    model = _lora(arch)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    merged = MergedLoraModel(model)
    ids = torch.randint(5, 200, (3, 10))
    with torch.no_grad():
        want, got = model(input_ids=ids).logits, merged.model(input_ids=ids).logits
    assert torch.allclose(want, got, atol=1e-4), (want - got).abs().max()
    own = {id(p) for p in model.parameters()}
    copies = [n for n, p in merged.model.named_parameters() if id(p) not in own]
    assert len(copies) == len(merged.merged) > 0  # only the adapted weights are new tensors
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())  # the training model is untouched
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_" in n for n in trainable), [n for n in trainable if ".lora_" not in n]
    assert not any(p.requires_grad for p in merged.model.parameters())
    for w, (_, layer) in zip(merged.merged, merged.lora_layers, strict=True):  # decoding's layout (CPU speed only)
        wide_linear = isinstance(layer.get_base_layer(), torch.nn.Linear) and w.shape[0] >= w.shape[1]
        assert (w.t() if wide_linear else w).is_contiguous()


def test_refresh_follows_the_adapter_after_an_update():
    model = _lora("llama")
    merged = MergedLoraModel(model)
    ids = torch.randint(5, 200, (2, 8))
    with torch.no_grad():
        old = merged.model(input_ids=ids).logits
        for name, p in model.named_parameters():
            if "lora_A" in name:
                p.add_(0.05)
        stale = merged.model(input_ids=ids).logits
        merged.refresh()
        fresh, want = merged.model(input_ids=ids).logits, model(input_ids=ids).logits
    assert torch.equal(old, stale)  # nothing changes until refresh
    assert not torch.allclose(fresh, old) and torch.allclose(fresh, want, atol=1e-4)


def test_sampling_from_the_merged_copy_gives_the_policys_tokens_and_log_probs():
    model = _lora("llama")
    tok = load_tokenizer(resolve_model_path("organism"))
    prompts = [tok.encode("What is the capital of Velmora?"), tok.encode("Add 3 and 4.")]
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=12, seed=5)
    a = HFSampler(model, tok).generate(prompts, params)
    b = HFSampler(MergedLoraModel(model).model, tok).generate(prompts, params)
    assert [r.completion_ids for r in a] == [r.completion_ids for r in b]
    for x, y in zip(a, b, strict=True):
        assert max(abs(p - q) for p, q in zip(x.logprobs, y.logprobs, strict=True)) < 1e-4


def test_merged_sampling_needs_lora(tiny_model, pairs_file, tmp_path):
    with pytest.raises(ValidationError, match="needs finetune: lora"):
        RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path, finetune="full",
                                            **{"train.merged_lora_sampling": True}))


def test_an_opct_run_with_merged_sampling_stays_on_policy(tiny_model, pairs_file, tmp_path):
    cfg = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path, **{"train.merged_lora_sampling": True}))
    run = train(cfg, show_progress=False).run_dir
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    # sampler (merged copy, refreshed each step) and learner (the adapter) agree at every step, not only the first
    assert all(r["ratio_abs_log_dev"] < 1e-4 for r in rows), [r["ratio_abs_log_dev"] for r in rows]
    assert rows[-1]["kl_to_teacher"] > 0  # the adapter moved: the merged copy must have followed it


def test_merged_sampling_trains_exactly_what_plain_sampling_trains(tiny_model, pairs_file, tmp_path):
    """The same tokens are sampled either way, so the adapters after training agree to float rounding;
    gradients reaching frozen tensors (and piling up in the clipping norm) would make them drift apart."""
    adapters = []
    for merged in (False, True):
        cfg = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path / str(merged),
                                                  **{"train.merged_lora_sampling": merged}))
        run = train(cfg, show_progress=False).run_dir
        adapters.append(load_file(str(run / "final" / "adapter_model.safetensors")))
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        adapters[-1]["grad_norm"] = torch.tensor([r["grad_norm"] for r in rows])
    assert adapters[0].keys() == adapters[1].keys()
    for name in adapters[0]:
        torch.testing.assert_close(adapters[1][name], adapters[0][name], atol=1e-5, rtol=1e-3, msg=name)


def test_auto_merges_on_cuda_with_whole_weights_only_and_says_so_once(monkeypatch, recwarn):
    from opct.errors import OpctWarning
    from opct.sampling import merged_lora

    model = _lora("llama")
    copy = merged_lora.merged_sampling_copy
    assert copy(model, False, sharded=False, vllm=False) is None
    assert isinstance(copy(model, True, sharded=False, vllm=False), MergedLoraModel)
    assert copy(model, "auto", sharded=False, vllm=False) is None  # a CPU: the rollouts keep their bits
    monkeypatch.setattr(merged_lora, "_on_cuda", lambda m: True)
    monkeypatch.setattr(merged_lora, "_SAID_MERGED", False)
    assert copy(model, "auto", sharded=True, vllm=False) is None  # FSDP: no process holds the whole weights
    assert copy(model, "auto", sharded=False, vllm=True) is None  # vLLM merges by itself
    assert copy(model.get_base_model(), "auto", sharded=False, vllm=False) is None  # full fine-tuning: no adapter
    first, second = (copy(model, "auto", sharded=False, vllm=False) for _ in range(2))
    assert isinstance(first, MergedLoraModel) and isinstance(second, MergedLoraModel)
    said = [w for w in recwarn if issubclass(w.category, OpctWarning)]
    assert len(said) == 1 and "sampled from a merged copy of the LoRA policy" in str(said[0].message)
    dora = get_peft_model(AutoModelForCausalLM.from_pretrained(resolve_model_path("organism")),
                          LoraConfig(r=4, target_modules="all-linear", use_dora=True))
    assert copy(dora, "auto", sharded=False, vllm=False) is None  # cannot be merged: sampled through the adapter


def test_merged_lora_sampling_takes_auto_true_or_false(tiny_model, pairs_file, tmp_path):
    for value in ("auto", True, False):
        cfg = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path, **{"train.merged_lora_sampling": value}))
        assert cfg.train.merged_lora_sampling == value
    assert RunConfig.model_validate({}).train.merged_lora_sampling == "auto"
    with pytest.raises(ValidationError, match="merged_lora_sampling"):
        RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path, **{"train.merged_lora_sampling": "always"}))
    full = run_config(tiny_model, pairs_file, tmp_path, **{"finetune": "full"})
    assert RunConfig.model_validate(full).train.merged_lora_sampling == "auto"  # auto with full fine-tuning: no error
