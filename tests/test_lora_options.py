"""PEFT's LoRA options on ``lora:`` (use_rslora, use_dora, modules_to_save, init_lora_weights): passed
through to the built adapter, recorded in a saved adapter's adapter_config.json, the teacher left as the
base, the merged export computing the trained adapter, and the merging samplers refused clearly."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import one_thread, run_config
from transformers import AutoModelForCausalLM

from opct.config import ConfigError, LoraConfig, RunConfig, load_config
from opct.models import add_lora, load_for_inference, make_teacher
from opct.training.loop import train


def test_the_defaults_are_peft_defaults_so_a_plain_run_builds_the_same_adapter():
    kwargs = LoraConfig().peft_kwargs()
    assert (kwargs["use_rslora"], kwargs["use_dora"], kwargs["modules_to_save"], kwargs["init_lora_weights"]) == (
        False, False, None, True)


@pytest.mark.parametrize("value", [False, "pissa", "olora", "eva", "loftq"])
def test_an_init_that_moves_the_base_or_starts_away_from_the_teacher_is_refused(value):
    with pytest.raises(ConfigError, match=r"lora.init_lora_weights: .*use true or gaussian"):
        load_config(None, [f"lora.init_lora_weights={json.dumps(value)}"])


@pytest.mark.parametrize("option", ["lora.use_dora=true", "lora.modules_to_save=[lm_head]"])
def test_the_samplers_that_merge_plain_lora_are_refused_with_dora_or_modules_to_save(option):
    with pytest.raises(ConfigError, match="train.merged_lora_sampling merges plain LoRA only"):
        load_config(None, [option, "train.merged_lora_sampling=true"])
    with pytest.raises(ConfigError, match="opct.sampling.engine: vllm loads the adapter merged as plain LoRA"):
        load_config(None, [option, "opct.sampling.engine=vllm"])
    load_config(None, [option])  # with the hf engine and unmerged sampling it is a run


def test_the_built_adapter_has_each_option(tiny_model):
    lora = LoraConfig(r=4, alpha=8, use_rslora=True, use_dora=True, modules_to_save=["lm_head"],
                      init_lora_weights="gaussian")
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    ids = torch.randint(5, 100, (2, 7))
    with torch.no_grad():
        before = base(ids).logits.clone()
    model = add_lora(base, lora)
    peft = model.peft_config["default"]
    assert (peft.use_rslora, peft.use_dora, peft.init_lora_weights) == (True, True, "gaussian")
    assert "lm_head" in peft.modules_to_save
    layer = model.get_base_model().model.layers[0].self_attn.q_proj
    assert layer.scaling["default"] == pytest.approx(8 / math.sqrt(4))  # rsLoRA: alpha / sqrt(r), not alpha / r
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("lora_magnitude_vector" in n for n in trainable)  # DoRA's magnitudes
    assert any("modules_to_save" in n and "lm_head" in n for n in trainable)
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, before, atol=1e-5)  # B = 0: the policy starts as the base
        for param in model.parameters():
            if param.requires_grad:
                param.add_(0.05)  # as after training: the adapter and the saved lm_head moved
        teacher = make_teacher(model)
        with teacher.active() as frozen:
            assert torch.equal(frozen(ids).logits, before)  # the teacher is the base, lm_head included
        assert not torch.allclose(model(ids).logits, before, atol=1e-3)


def test_a_trained_run_records_the_options_and_its_export_computes_the_adapter(tiny_model, pairs_file, tmp_path):
    from opct.training.export import export_merged

    cfg = RunConfig.model_validate(run_config(
        tiny_model, pairs_file, tmp_path / "runs", **{"train.max_steps": 2, "train.checkpoint_every": 2,
                                                       "lora.use_rslora": True, "lora.use_dora": True,
                                                       "lora.modules_to_save": ["lm_head"]}))
    with one_thread():
        result = train(cfg, show_progress=False)
    saved = json.loads((result.final_dir / "adapter_config.json").read_text())
    assert (saved["use_rslora"], saved["use_dora"], saved["init_lora_weights"]) == (True, True, True)
    assert "lm_head" in saved["modules_to_save"]
    trained, _ = load_for_inference(str(cfg.run_dir))  # the adapter merged onto its checked base
    merged = AutoModelForCausalLM.from_pretrained(export_merged(str(cfg.run_dir), tmp_path / "merged"))
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    ids = torch.randint(5, 100, (2, 7))
    with torch.no_grad():
        exported, loaded, untrained = merged(ids).logits, trained(ids).logits, base(ids).logits
    assert torch.allclose(exported, loaded, atol=1e-5)
    assert not torch.allclose(exported, untrained, atol=1e-4)  # the DoRA magnitudes and lm_head were merged in
