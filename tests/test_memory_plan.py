"""The dry run's memory plan (opct/training/memory_plan.py) and model shapes (opct/training/model_shapes.py):
parameter counts against built models, the plan against hand computations, shapes read without the network."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    Gemma2Config,
    Gemma3TextConfig,
    LlamaConfig,
    MistralConfig,
    Qwen2Config,
    Qwen3Config,
)

from opct.training import memory_plan as mp
from opct.training.model_shapes import (
    KNOWN_SHAPES,
    ModelShape,
    ShapeUnknown,
    lora_parameter_count,
    parameter_count,
    read_shape,
    shape_of,
)

SMALL = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8)
CONFIGS = {
    "qwen3-tied": Qwen3Config(**SMALL, tie_word_embeddings=True),
    "qwen3-untied": Qwen3Config(**SMALL, tie_word_embeddings=False),
    "llama": LlamaConfig(**SMALL, tie_word_embeddings=False),
    "llama-biases": LlamaConfig(**SMALL, attention_bias=True, mlp_bias=True),
    "mistral": MistralConfig(**SMALL),
    "qwen2": Qwen2Config(**SMALL, tie_word_embeddings=False),
    "gemma2": Gemma2Config(**SMALL),
    "gemma3-text": Gemma3TextConfig(**SMALL, sliding_window=16),
}


def _built(config) -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config)


@pytest.mark.parametrize("name", CONFIGS)
def test_parameter_count_is_that_of_the_built_model(name):
    config = CONFIGS[name]
    model = _built(config)
    assert parameter_count(shape_of(config)) == sum(p.numel() for p in model.parameters())
    assert shape_of(config).known_family


@pytest.mark.parametrize("targets", ["all-linear", ["q_proj", "v_proj"], ["down_proj", "o_proj", "gate_proj"]])
@pytest.mark.parametrize("name", ["qwen3-tied", "gemma3-text", "llama"])
def test_lora_parameter_count_is_what_peft_trains(name, targets):
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(_built(CONFIGS[name]), LoraConfig(r=4, lora_alpha=4, target_modules=targets))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert lora_parameter_count(shape_of(CONFIGS[name]), 4, targets) == trainable


def test_the_recipe_models_counts_by_hand():
    # Qwen3-4B: V d = 151,936 x 2,560 = 388,956,160 (tied); per layer: q 2,560 x 4,096 and o 4,096 x 2,560
    # (20,971,520), k and v 2,560 x 1,024 each (5,242,880), MLP 3 x 2,560 x 9,728 = 74,711,040, norms
    # 2 x 2,560 + q/k norms 2 x 128 = 5,376: 100,930,816; x 36 = 3,633,509,376; + final norm 2,560
    assert parameter_count(shape_of(KNOWN_SHAPES["Qwen/Qwen3-4B"])) == 388_956_160 + 3_633_509_376 + 2_560
    # Gemma 3 12B's text model: keras-hub's preset counts 11,765,788,416 with a 262,144-token vocabulary;
    # transformers' config has 262,208 tokens, 64 x 3,840 = 245,760 more
    assert parameter_count(shape_of(KNOWN_SHAPES["google/gemma-3-12b-it"])) == 11_765_788_416 + 245_760


#: A shape small enough to compute by hand: d=8, I=16, 2 layers, 2 heads, 1 KV head, hd=4, V=10, tied, Qwen3.
TOY = ModelShape("qwen3", vocab_size=10, hidden_size=8, intermediate_size=16, num_hidden_layers=2,
                 num_attention_heads=2, num_key_value_heads=1, head_dim=4, tie_word_embeddings=True)


def _toy_settings(**kw) -> mp.StepSettings:
    base = dict(finetune="full", weight_bytes=2, activation_bytes=2, lora_rank=2, lora_targets="all-linear",
                master_weights="auto", gradient_checkpointing=False, pairs_per_step=4, samples_per_pair=3,
                prompt_tokens=6, completion_tokens=10, sequences_per_microbatch=4, sequences_per_call=8,
                logprob_chunk_positions=5, whole_logits_max_mib=64.0, logits_copies=1, on_policy=True, merged_lora_sampling=False,
                processes=2, fsdp=True)
    return mp.StepSettings(**{**base, **kw})


def test_the_plan_of_a_toy_shape_by_hand():
    # parameters: embeddings 80; a layer: q 8x8, k 8x4, v 8x4, o 8x8 (192), MLP 3 x 8 x 16 (384), norms 2 x 8,
    # q/k norms 2 x 4 (24): 600; 2 layers 1,200; final norm 8: 1,288
    assert parameter_count(TOY) == 1_288
    s = _toy_settings()
    plan = mp.memory_plan(TOY, s)
    # full fine-tuning in bf16 over 2 FSDP processes: each holds half of every weight-sized thing
    assert plan.parts["weights"] == 1_288 * 2 // 2
    assert plan.parts["gradients"] == 1_288 * 2 // 2
    assert plan.parts["master_copy"] == 1_288 * 4 // 2  # auto + bf16 weights: an fp32 master copy
    assert plan.parts["optimizer"] == 2 * 1_288 * 4 // 2  # its moments in fp32
    assert plan.parts["teacher"] == 1_288 * 2 // 2
    # composition: 2 pairs and 6 rollouts per process; 2 microbatches of at most 4; one sampling call of 6
    c = mp.step_composition(s)
    assert (c.pairs_per_process, c.rollouts_per_process, c.microbatches_per_process) == (2, 6, 2)
    assert (c.sampling_calls_per_process, c.tokens_per_sequence, c.completion_tokens_per_step) == (1, 16, 120)
    # activations: 4 sequences x 16 tokens; per layer and token (q = 8, kv = 4): norms 2 x (4 + 4) x 8 = 128,
    # attention 2 x 2 x 12 = 48, q/k norms (4 + 2) x 12 = 72, MLP 4 x 2 x 16 = 128: 376 bytes; the final norm
    # (4 + 4) x 8 = 64: 64 x (2 x 376 + 64) = 52,224; checkpointed 64 x (2 x 8 x 2 + 376 + 64) = 30,208
    assert mp.layer_activation_bytes(TOY, s) == 376
    assert plan.activations_without_checkpointing == 52_224 == plan.parts["activations"]
    assert plan.activations_with_checkpointing == 30_208
    # the logits: under FSDP built whole, 4 sequences x 10 tokens x 10 words x (2 + 8) bytes; KV cache: 6 rows x
    # 16 tokens x 2 layers x 2 x 1 x 4 x 2
    assert plan.parts["logits_chunks"] == 4_000 and plan.parts["kv_cache"] == 6 * 16 * 32
    assert plan.parts["sampling_logits"] == 6 * 10 * 8
    assert plan.parts["gathered_for_sampling"] == 1_288 * 2 // 2  # the other half, gathered to sample
    persistent = 1_288 + 2_576 + 5_152 + 1_288
    assert plan.training_peak == persistent + 1_288 + 52_224 + 4_000
    assert plan.rollout_peak == persistent + 3_072 + 480 + 1_288
    assert plan.peak == plan.training_peak


def test_the_logits_follow_the_scoring_rule_whole_under_the_limit_else_chunks_that_fit_it():
    """opct.methods.logit_path's rule: 40 positions x 10 words whole while 1,600 float32 bytes fit the limit,
    else logprob_chunk_positions (5) positions, fewer where 5 do not fit; under FSDP always whole."""
    one_position = 4 * 10 / 2**20  # MiB of one position's float32 logits
    assert mp.logits_chunk(_toy_settings(fsdp=False), 10) == 40
    assert mp.logits_chunk(_toy_settings(fsdp=False, whole_logits_max_mib=39 * one_position), 10) == 5
    assert mp.logits_chunk(_toy_settings(fsdp=False, whole_logits_max_mib=3 * one_position), 10) == 3
    assert mp.logits_chunk(_toy_settings(fsdp=True, whole_logits_max_mib=3 * one_position), 10) == 40
    plan = mp.memory_plan(TOY, _toy_settings(fsdp=False, whole_logits_max_mib=3 * one_position))
    assert plan.parts["logits_chunks"] == 3 * 10 * (2 + 8)


def test_checkpointing_lora_master_copy_and_vocabulary_losses_change_what_they_should():
    s = _toy_settings()
    checkpointed = mp.memory_plan(TOY, _toy_settings(gradient_checkpointing=True))
    assert checkpointed.parts["activations"] == checkpointed.activations_with_checkpointing
    assert checkpointed.training_peak < mp.memory_plan(TOY, s).training_peak
    assert mp.memory_plan(TOY, _toy_settings(master_weights="off")).parts["master_copy"] == 0
    assert mp.memory_plan(TOY, _toy_settings(weight_bytes=4, master_weights="fp32")).parts["master_copy"] == 0
    assert mp.memory_plan(TOY, _toy_settings(logits_copies=2)).parts["logits_chunks"] == 8_000  # the teacher's too
    lora = mp.memory_plan(TOY, _toy_settings(finetune="lora", fsdp=False, processes=1))
    adapter = lora_parameter_count(TOY, 2, "all-linear")
    assert lora.trained_parameters == adapter == 2 * 2 * (16 + 12 + 12 + 16 + 24 + 24 + 24)
    assert lora.parts["teacher"] == 0 and lora.parts["master_copy"] == 0 and lora.parts["gathered_for_sampling"] == 0
    assert lora.parts["optimizer"] == 2 * adapter * 4 and lora.parts["weights"] == 1_288 * 2 + adapter * 4
    assert mp.memory_plan(TOY, s).fits(mp.GIB) and not mp.memory_plan(TOY, s).fits(1_000)
    offline = mp.memory_plan(TOY, _toy_settings(on_policy=False))  # BCT: no rollouts, no teacher copy
    assert offline.parts["teacher"] == offline.parts["kv_cache"] == offline.parts["gathered_for_sampling"] == 0
    assert mp.step_composition(_toy_settings(on_policy=False)).sampling_calls_per_process == 0


def test_each_loss_kind_declares_the_logits_chunks_it_holds_and_the_plan_reads_it():
    """A loss kind's memory term lives with the kind (``logits_copies``), so a new kind needs no edit here."""
    from typing import get_args

    from opct.config import RunConfig
    from opct.methods.opct import LossConfig

    kinds = [get_args(member)[0] for member in get_args(get_args(LossConfig)[0])]
    assert {k.__name__ for k in kinds} == {"SampledLoss", "TopKLoss", "FullLoss"}
    for kind in kinds:
        assert "logits_copies" in vars(kind), f"{kind.__name__} does not declare its logits_copies"
        (name,) = get_args(kind.model_fields["kind"].annotation)  # its Literal tag
        cfg = RunConfig.model_validate({"method": "opct", "opct": {"loss": {"kind": name}}})
        assert mp.step_settings(cfg).logits_copies == kind.logits_copies == (1 if name == "sampled" else 2)
    assert mp.step_settings(RunConfig.model_validate({"method": "bct"})).logits_copies == 1  # no loss section


def test_shapes_are_read_from_a_folder_a_run_the_table_and_never_the_network(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    CONFIGS["llama"].save_pretrained(tmp_path / "m")
    assert read_shape(str(tmp_path / "m")) == shape_of(CONFIGS["llama"], str(tmp_path / "m" / "config.json"))
    (tmp_path / "run" / "final").mkdir(parents=True)
    (tmp_path / "run" / "final" / "config.json").write_text(json.dumps(CONFIGS["qwen2"].to_dict()))
    assert read_shape(str(tmp_path / "run")).qkv_bias
    assert read_shape("Qwen/Qwen3-8B").num_hidden_layers == 36
    with pytest.raises(ShapeUnknown, match="pass a local folder"):
        read_shape("someone/not-a-known-model")


RECIPES = {"qwen3_4b_lora_opct.yaml": [], "gemma3_12b_lora_opct.yaml": [],
           "qwen3_8b_full_fsdp.yaml": ["--gpus", "8", "--fsdp"]}


@pytest.mark.parametrize("recipe", RECIPES)
def test_the_dry_run_of_each_recipe_prints_its_plan_and_loads_nothing(recipe, monkeypatch):
    from conftest import REPO
    from typer.testing import CliRunner

    from opct.cli.main import app
    from opct.config import load_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = REPO / "configs" / recipe
    result = CliRunner().invoke(app, ["train", "--dry-run", "-c", str(path), *RECIPES[recipe], "--gpu-memory", "80"])
    assert result.exit_code == 0, result.output
    cfg = load_config(path)
    assert cfg.train.gradient_checkpointing and cfg.model.dtype == "bfloat16"
    gpus = int(RECIPES[recipe][1]) if RECIPES[recipe] else 1
    settings = mp.step_settings(cfg, processes=gpus, fsdp="--fsdp" in RECIPES[recipe])
    plan = mp.memory_plan(read_shape(cfg.model.name_or_path), settings)
    peak_line = f"peak{'':<36} {plan.peak / mp.GIB:8.2f} GiB"
    assert peak_line in result.output
    page = (REPO / "docs" / "gpus.md").read_text(encoding="utf-8")
    shown = page.split(f"dry run of {cfg.name}:")[1].split("```")[0]  # the page's copy of this dry run's output
    assert peak_line in shown, f"docs/gpus.md shows another estimate for {recipe}: run its dry run and paste it"
    assert "fits a 80 GiB GPU" in result.output and not (REPO / "runs" / cfg.name).exists()
    assert settings.completion_tokens == 1024


def test_the_dry_runs_options_without_the_dry_run_are_refused(tmp_path):
    from conftest import REPO
    from typer.testing import CliRunner

    from opct.cli.main import app

    result = CliRunner().invoke(app, ["train", "-c", str(REPO / "configs" / "qwen3_4b_lora_opct.yaml"), "--gpus", "8",
                                      "--set", f"output_dir={tmp_path}"])
    assert result.exit_code == 2 and "add --dry-run" in result.output and not any(tmp_path.iterdir())


@pytest.mark.parametrize(("name", "lora"), [("qwen3-tied", False), ("llama", False), ("qwen3-tied", True)])
def test_a_layers_activation_estimate_is_what_autograd_saves(name, lora):
    """What a bf16 decoder layer (SDPA attention; with a LoRA adapter under bf16 autocast, as the recipes train)
    saves for its backward, counted storage by storage with ``saved_tensors_hooks`` (its own weights left out),
    against ``A`` of the module docstring: within 5%."""
    from opct.config import LoraConfig
    from opct.models import add_lora

    config = CONFIGS[name].__class__(**{**SMALL, "vocab_size": 96, "hidden_size": 128, "intermediate_size": 384,
                                        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32},
                                     attn_implementation="sdpa")
    model = _built(config).to(torch.bfloat16)
    if lora:
        model = add_lora(model, LoraConfig(r=8, alpha=8)).base_model.model
    layer, rows, length = model.model.layers[1], 4, 256  # enough tokens that per-call constants (cast adapter weights) are small
    hidden = torch.randn(rows, length, 128, dtype=torch.bfloat16, requires_grad=True)
    positions = torch.arange(length)[None].expand(rows, -1)
    saved: dict[int, int] = {}

    def keep(t: torch.Tensor) -> torch.Tensor:
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=lora), torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        layer(hidden, position_embeddings=model.model.rotary_emb(hidden, positions), attention_mask=None,
              position_ids=positions)
    weights = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    measured = sum(n for ptr, n in saved.items() if ptr not in weights)
    settings = _toy_settings(activation_bytes=2, finetune="lora" if lora else "full", lora_rank=8)
    estimate = mp.layer_activation_bytes(shape_of(config), settings) * rows * length
    assert abs(measured / estimate - 1) <= 0.05, (measured, estimate)


def test_the_static_decoders_cache_and_the_optimizer_steps_temporaries_by_hand():
    """The terms issue 70 found missing: the static decoder's KV cache (a call's rows at the bucketed capacity,
    freed when the call ends, so in the rollout phase only; the rollouts' own cache is then the prompts') and the
    optimizer step's temporaries (float32 gradient copies and foreach AdamW's sqrt(v): 8 bytes per trained
    parameter with a master copy), held with the gradients in a phase of their own."""
    s = _toy_settings(static_decoder=True)
    plan = mp.memory_plan(TOY, s)
    kv_per_token = 2 * 2 * 1 * 4 * 2  # layers x (k, v) x KV heads x head_dim x bf16
    assert plan.parts["static_cache"] == 6 * 64 * kv_per_token  # 6 rows; 6 + 10 tokens rounded up to 64
    assert plan.parts["kv_cache"] == 6 * 6 * kv_per_token  # the encoded prompts, copied into it
    assert plan.parts["optimizer_step"] == 1_288 * 8 // 2  # a master copy: fp32 gradients + sqrt(v)
    persistent = 1_288 + 2_576 + 5_152 + 1_288
    assert plan.step_peak == persistent + 1_288 + 1_288 * 8 // 2
    assert plan.rollout_peak == persistent + 6 * 6 * kv_per_token + 6 * 64 * kv_per_token + 480 + 1_288
    plain_adamw = mp.memory_plan(TOY, _toy_settings(master_weights="off"))
    assert plain_adamw.parts["optimizer_step"] == 1_288 * 2 // 2 and plain_adamw.parts["static_cache"] == 0
    assert plan.peak == max(plan.rollout_peak, plan.training_peak, plan.step_peak)


def test_the_static_decoder_is_planned_unless_the_run_decodes_plain_or_with_vllm():
    from conftest import REPO

    from opct.config import load_config

    recipe = REPO / "configs" / "qwen3_4b_lora_opct.yaml"
    assert mp.step_settings(load_config(recipe)).static_decoder
    for override in ("opct.sampling.decoder=plain", "opct.sampling.engine=vllm"):
        assert not mp.step_settings(load_config(recipe, [override])).static_decoder
