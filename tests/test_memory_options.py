"""Memory options of training: gradient checkpointing (``train.gradient_checkpointing``) and fp32 master
weights (``optim.master_weights``).

Gradient checkpointing is checked on three families of the family matrix (Llama, Qwen3, GPT-2: tiny
random models of :data:`opct.testing.families.FAMILIES` on the tiny test tokenizer), for OPCT and BCT,
LoRA and full fine-tuning: the same rollouts (the sampler keeps its KV cache), the layers really run
twice, and the same loss and gradients as without. Master weights are checked against an fp32
reference (small bf16 updates accumulate as in fp32, and round away without), against
``torch.optim.AdamW`` itself, and through a bf16 full fine-tuning run that resumes bit for bit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import run_config
from run_helpers import EVERY_STEP, interrupt
from safetensors.torch import load_file

from opct.config import OptimConfig, RunConfig
from opct.training.master_weights import MasterWeightAdamW, make_optimizer, wants_master_weights

FAMILIES = ("llama", "qwen3", "gpt2")
PROMPTS = [
    ([{"role": "user", "content": f"What is {i} + {i}? I am sure it is {i + 3}."}], f"What is {i} + {i}?")
    for i in range(2)
]


@pytest.fixture(scope="module")
def family_models(tiny_model, tmp_path_factory) -> dict[str, Path]:
    """A tiny random model of each family, on the tiny test tokenizer (a 2-layer, 64-wide config of the matrix)."""
    from opct.testing.families import make_config_model

    root = tmp_path_factory.mktemp("families")
    return {family: make_config_model(family, str(tiny_model), root / family) for family in FAMILIES}


def _one_step(model_dir: Path, tmp_path: Path, method: str, finetune: str, checkpointing: bool, share: bool):
    """Rollouts, loss and gradients of one microbatch, built as the training loop builds them."""
    from accelerate import Accelerator

    from opct.methods import METHODS
    from opct.methods.base import Microbatch, TrainContext
    from opct.models import add_lora, disable_dropout, load_model, load_tokenizer, make_teacher
    from opct.pairs import ConsistencyPair
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler
    from opct.training.activation_checkpointing import checkpointed_layers, enable_gradient_checkpointing

    overrides = {"train.gradient_checkpointing": checkpointing, "train.share_prompt_prefix": share}
    cfg = RunConfig.model_validate(run_config(model_dir, tmp_path / "unused.jsonl", tmp_path, method=method,
                                              finetune=finetune, **overrides))
    model = load_model(cfg.model)
    disable_dropout(model)
    if finetune == "lora":
        torch.manual_seed(0)  # the same adapter both times
        model = add_lora(model, cfg.lora)
    teacher = make_teacher(model)
    if checkpointing:
        assert enable_gradient_checkpointing(model) == 2
    assert checkpointed_layers(teacher.model) == (2 if checkpointing and teacher.shares_weights else 0)  # a copy: never
    model.train()
    tokenizer = load_tokenizer(str(model_dir))
    ctx = TrainContext(cfg=cfg, accelerator=Accelerator(cpu=True), model=model, policy=model, tokenizer=tokenizer,
                       teacher=teacher, run_dir=tmp_path)
    trainer = METHODS.get(method)(ctx)
    pairs = [ConsistencyPair(f"p{i}", prompt, clean) for i, (prompt, clean) in enumerate(PROMPTS)]
    rollouts = ctx.sample(HFSampler(model, tokenizer), pairs, SamplingParams(n=3, temperature=1.0, max_new_tokens=12, seed=1))
    mb = Microbatch(pairs, [r.completion_ids for r in rollouts], [r.prompt_index for r in rollouts],
                    [r.logprobs for r in rollouts], [r.truncated for r in rollouts])
    layer = next(m for m in model.modules() if type(m).__name__.endswith(("DecoderLayer", "Block")))
    calls: list[int] = []
    # calls of the layer's first submodule with gradients on: the student's forward and any recompute, not the teacher's
    hook = next(layer.children()).register_forward_hook(lambda *_: calls.append(1) if torch.is_grad_enabled() else None)
    loss, _ = trainer.loss(mb)
    loss.backward()
    hook.remove()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    return [(r.completion_ids, r.logprobs) for r in rollouts], float(loss.detach()), grads, len(calls)


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm()) if b.norm() > 0 else float(a.norm())


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("method", "finetune"), [("opct", "lora"), ("opct", "full"), ("bct", "lora"), ("bct", "full")])
def test_gradient_checkpointing_gives_the_same_loss_and_gradients(family_models, tmp_path, family, method, finetune):
    """Whole-sequence scoring either way: checkpointing changes nothing to 1e-6 (measured here: bit for bit)."""
    plain = _one_step(family_models[family], tmp_path, method, finetune, checkpointing=False, share=False)
    checkpointed = _one_step(family_models[family], tmp_path, method, finetune, checkpointing=True, share=False)
    assert checkpointed[0] == plain[0]  # sampling is untouched: eval mode, no gradients, its KV cache
    assert checkpointed[3] == 2 * plain[3]  # the layer ran again in the backward pass: it was checkpointed
    assert abs(checkpointed[1] - plain[1]) <= 1e-6 * abs(plain[1])
    assert plain[2].keys() == checkpointed[2].keys()
    assert any(g.norm() > 0 for g in plain[2].values())
    for name, grad in plain[2].items():
        assert _relative(checkpointed[2][name], grad) <= 1e-6, name


@pytest.mark.parametrize("family", FAMILIES)
def test_gradient_checkpointing_with_shared_prefix_defaults(family_models, tmp_path, family):
    """With opct's defaults the plain run scores on a shared prompt prefix (a KV cache) and the checkpointed
    one scores whole sequences (a checkpointed layer fills no cache): the same loss to 1e-6 and gradients to
    the rounding between the two scorings (measured up to 1.2e-6 of the gradient's norm; 5e-6 allowed)."""
    plain = _one_step(family_models[family], tmp_path, "opct", "lora", checkpointing=False, share=True)
    checkpointed = _one_step(family_models[family], tmp_path, "opct", "lora", checkpointing=True, share=True)
    assert checkpointed[0] == plain[0]
    assert abs(checkpointed[1] - plain[1]) <= 1e-6 * abs(plain[1])
    flat = torch.cat([g.flatten() for g in plain[2].values()])
    diff = torch.cat([(checkpointed[2][n] - g).flatten() for n, g in plain[2].items()])
    assert float(diff.norm() / flat.norm()) <= 5e-6


def test_a_checkpointed_run_trains_as_a_plain_one(tiny_model, pairs_file, tmp_path, monkeypatch):
    """Through the loop: checkpointing is turned on (after the teacher is made) and the losses match."""
    from opct.training import loop

    enabled: list[int] = []
    original = loop.enable_gradient_checkpointing
    monkeypatch.setattr(loop, "enable_gradient_checkpointing", lambda model: enabled.append(original(model)) or enabled[-1])
    runs = {}
    for checkpointing in (False, True):
        cfg = RunConfig.model_validate(run_config(
            tiny_model, pairs_file, tmp_path / str(checkpointing), finetune="full",
            **{"train.gradient_checkpointing": checkpointing, "train.max_steps": 2},
        ))
        loop.train(cfg, show_progress=False)
        runs[checkpointing] = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert enabled == [2]
    assert [r["completion_tokens"] for r in runs[True]] == [r["completion_tokens"] for r in runs[False]]
    for a, b in zip(runs[True], runs[False], strict=True):
        assert abs(a["loss"] - b["loss"]) <= 1e-5 * max(1.0, abs(b["loss"]))


def test_accelerates_fsdp_activation_checkpointing_is_refused():
    from types import SimpleNamespace

    from opct.errors import DistributionError
    from opct.training.activation_checkpointing import check_accelerate_checkpointing

    check_accelerate_checkpointing(SimpleNamespace(state=SimpleNamespace(fsdp_plugin=None)))
    check_accelerate_checkpointing(SimpleNamespace(state=SimpleNamespace(fsdp_plugin=SimpleNamespace(activation_checkpointing=False))))
    with pytest.raises(DistributionError, match="train.gradient_checkpointing: true"):
        check_accelerate_checkpointing(SimpleNamespace(state=SimpleNamespace(fsdp_plugin=SimpleNamespace(activation_checkpointing=True))))


def _ulps_apart(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many bfloat16 steps apart two bfloat16 tensors of the same signs are (their bit patterns' distance)."""
    return (a.view(torch.int16).int() - b.view(torch.int16).int()).abs()


def test_master_weights_accumulate_small_bf16_updates_as_fp32_does():
    """200 AdamW steps of about lr = 1e-4 each on weights of magnitude 0.5 to 2, whose bfloat16 step is 2^-9
    to 2^-7: every single update is below half a bfloat16 step. The fp32 reference moves by 0.02; bf16 with
    master weights ends within one bf16 step of it; plain AdamW on the bf16 weights never moves them."""
    gen = torch.Generator().manual_seed(0)
    start = (torch.rand(4096, generator=gen) * 1.5 + 0.5) * torch.where(torch.rand(4096, generator=gen) < 0.5, -1.0, 1.0)
    start = start.bfloat16()
    sign = torch.where(torch.rand(4096, generator=gen) < 0.5, -1.0, 1.0)
    weights = {name: torch.nn.Parameter(start.clone().to(dtype)) for name, dtype in
               (("fp32", torch.float32), ("master", torch.bfloat16), ("off", torch.bfloat16))}
    optim = {"lr": 1e-4, "betas": (0.9, 0.95), "weight_decay": 0.0}
    optimizers = {
        "fp32": torch.optim.AdamW([weights["fp32"]], **optim),
        "master": make_optimizer([weights["master"]], OptimConfig(**optim, master_weights="auto")),
        "off": make_optimizer([weights["off"]], OptimConfig(**optim, master_weights="off")),
    }
    assert isinstance(optimizers["master"], MasterWeightAdamW) and type(optimizers["off"]) is torch.optim.AdamW
    for _ in range(200):
        grad = sign * (torch.rand(4096, generator=gen) + 0.5)  # steady sign, varying size
        for name, p in weights.items():
            p.grad = grad.to(p.dtype)
            optimizers[name].step()
    reference = weights["fp32"].detach()
    assert (reference - start.float()).abs().min() > 0.015  # the fp32 run moved by about 200 * 1e-4
    assert (_ulps_apart(reference.bfloat16(), start) >= 2).float().mean() > 0.9  # by at least 2 bf16 steps, mostly
    assert int(_ulps_apart(weights["master"].detach(), reference.bfloat16()).max()) <= 1
    assert torch.equal(weights["off"].detach(), start)  # every update rounded away
    master = optimizers["master"].state[weights["master"]]
    assert {master[k].dtype for k in ("master", "exp_avg", "exp_avg_sq")} == {torch.float32}


def test_master_weights_of_fp32_weights_step_exactly_as_adamw():
    """``fp32`` on fp32 weights: no copy, and torch's AdamW arithmetic bit for bit (weight decay included)."""
    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(64, 8)), torch.nn.Parameter(torch.randn(8))
    c, d = torch.nn.Parameter(a.detach().clone()), torch.nn.Parameter(b.detach().clone())
    settings = {"lr": 3e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
    reference = torch.optim.AdamW([a, b], **settings)
    wrapped = make_optimizer([c, d], OptimConfig(**settings, master_weights="fp32"))
    assert isinstance(wrapped, MasterWeightAdamW)
    for _ in range(5):
        g1, g2 = torch.randn(64, 8), torch.randn(8)
        a.grad, b.grad, c.grad, d.grad = g1, g2, g1.clone(), g2.clone()
        reference.step()
        wrapped.step()
    assert torch.equal(a, c) and torch.equal(b, d)
    assert "master" not in wrapped.state[c]


def test_auto_turns_master_weights_on_exactly_for_half_precision_trained_weights(tiny_model):
    from opct.config import LoraConfig, ModelConfig
    from opct.models import add_lora, load_model

    full32 = list(load_model(ModelConfig(name_or_path=str(tiny_model))).parameters())
    full16 = list(load_model(ModelConfig(name_or_path=str(tiny_model), dtype="bfloat16")).parameters())
    lora16 = add_lora(load_model(ModelConfig(name_or_path=str(tiny_model), dtype="bfloat16")), LoraConfig(r=4, alpha=8))
    adapter = [p for p in lora16.parameters() if p.requires_grad]  # peft keeps the adapter in fp32
    assert not wants_master_weights("auto", full32) and wants_master_weights("auto", full16)
    assert not wants_master_weights("auto", adapter)
    assert wants_master_weights("fp32", full32) and not wants_master_weights("off", full16)


def test_master_weights_survive_a_state_dict_round_trip_in_fp32():
    p = torch.nn.Parameter(torch.randn(32).bfloat16())
    opt = MasterWeightAdamW([p], lr=1e-3)
    p.grad = torch.randn(32).bfloat16()
    opt.step()
    saved = opt.state_dict()
    q = torch.nn.Parameter(p.detach().clone())
    again = MasterWeightAdamW([q], lr=1e-3)
    again.load_state_dict(saved)
    for key in ("master", "exp_avg", "exp_avg_sq"):
        assert again.state[q][key].dtype == torch.float32 and torch.equal(again.state[q][key], opt.state[p][key]), key
    assert not torch.equal(opt.state[p]["master"], p.detach().float())  # the copy holds bits bf16 cannot


def test_bf16_full_finetuning_checkpoints_its_master_weights_and_resumes_bit_for_bit(tiny_model, pairs_file, tmp_path):
    from opct.training.loop import train

    settings = {"finetune": "full", "model.dtype": "bfloat16", "train.max_steps": 3, **EVERY_STEP}
    cfg = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path / "ref", **settings))
    train(cfg, show_progress=False)
    last = cfg.run_dir / "checkpoints" / "step-3"
    optimizer, weights = load_file(str(last / "optimizer.safetensors")), load_file(str(last / "model.safetensors"))
    masters = {k.rpartition("/")[0]: v for k, v in optimizer.items() if k.endswith("/master")}
    assert masters.keys() == weights.keys()  # auto: every trained weight is bf16, so each has its master copy
    assert all(masters[n].dtype == torch.float32 and weights[n].dtype == torch.bfloat16 for n in masters)
    assert all(torch.equal(masters[n].bfloat16(), weights[n]) for n in masters)  # the weights are the rounded copy
    assert any(not torch.equal(masters[n], weights[n].float()) for n in masters)  # and the copy holds more bits

    resumed = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path / "resumed", **settings))
    shutil.copytree(cfg.run_dir, resumed.run_dir)
    interrupt(resumed.run_dir, after_step=1)
    train(resumed, show_progress=False)
    for name in ("model.safetensors", "optimizer.safetensors"):
        a, b = load_file(str(last / name)), load_file(str(resumed.run_dir / "checkpoints" / "step-3" / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name


def test_both_options_under_fsdp2_match_one_process_and_resume_bit_for_bit(tiny_model, pairs_file, tmp_path):
    """Two gloo processes under FSDP2, bf16 full fine-tuning with gradient checkpointing (and so master
    weights, ``auto``): the loss curve of one process, master copies gathered into the checkpoint, a resume
    bit for bit."""
    from test_fsdp import _launch_fsdp

    from opct.training.loop import train

    settings = {"finetune": "full", "model.dtype": "bfloat16", "train.gradient_checkpointing": True,
                "train.max_steps": 2, "train.checkpoint_every": 1, "train.sequences_per_microbatch": 2}
    cfg = run_config(tiny_model, pairs_file, tmp_path / "a", **settings)
    _launch_fsdp(tmp_path, cfg)
    run = tmp_path / "a" / "t"
    single = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path / "one", **settings))
    train(single, show_progress=False)
    sharded_curve = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    single_curve = [json.loads(line) for line in (single.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["completion_tokens"] for r in sharded_curve] == [r["completion_tokens"] for r in single_curve]
    for a, b in zip(sharded_curve, single_curve, strict=True):  # bf16: the reduction order changes the rounding
        assert abs(a["loss"] - b["loss"]) <= 2e-2 * max(1.0, abs(b["loss"])), (a["loss"], b["loss"])
    optimizer = load_file(str(run / "checkpoints" / "step-2" / "optimizer.safetensors"))
    weights = load_file(str(run / "checkpoints" / "step-2" / "model.safetensors"))
    masters = {k.rpartition("/")[0]: v for k, v in optimizer.items() if k.endswith("/master")}
    assert masters.keys() == weights.keys() and all(torch.equal(masters[n].bfloat16(), weights[n]) for n in masters)

    resumed = tmp_path / "b" / "t"
    shutil.copytree(run, resumed)
    interrupt(resumed, after_step=1)
    _launch_fsdp(tmp_path, {**cfg, "output_dir": str(tmp_path / "b")})
    for name in ("model.safetensors", "optimizer.safetensors"):
        a = load_file(str(run / "checkpoints" / "step-2" / name))
        b = load_file(str(resumed / "checkpoints" / "step-2" / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
