"""ACT (activation consistency): the loss against a hand computation, zero gradient on identical prompts,
hooks on every family, training, exact resume and the distance it lowers on held-out pairs."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import make_pairs, run_config
from run_helpers import interrupt
from safetensors.torch import load_file

from opct.config import ConfigError, RunConfig, load_config
from opct.methods.act import (
    ACTMethod,
    activation_distance,
    aligned_activations,
    chosen_layers,
    decoder_layers,
    residual_streams,
    shared_suffix_length,
)
from opct.pairs import ConsistencyPair
from opct.training.loop import train

REPO = Path(__file__).resolve().parents[1]


def test_shared_suffix_length():
    assert shared_suffix_length([1, 2, 3, 4], [9, 3, 4]) == 2
    assert shared_suffix_length([1, 2], [1, 2]) == 2
    assert shared_suffix_length([1, 2], [2, 1]) == 0
    assert shared_suffix_length([], [1]) == 0


def test_chosen_layers_count_from_the_end_and_refuse_out_of_range():
    assert chosen_layers(None, 3) == [0, 1, 2] and chosen_layers([-1, 0], 3) == [0, 2]
    with pytest.raises(ConfigError, match=r"act.layers: \[3\] out of range .* 3 decoder layers"):
        chosen_layers([3], 3)


@pytest.fixture(scope="module")
def tiny(tiny_model):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(str(tiny_model)).eval()


def test_the_loss_is_the_hand_computed_mean_squared_residual_difference(tiny):
    """Batched, right-padded, hooked: the same number as one prompt at a time through
    ``output_hidden_states`` (``hidden_states[1]`` is layer 0's output) and a Python loop."""
    student_prompts = [[5, 6, 7, 8, 9, 10], [11, 12, 9, 10]]
    teacher_prompts = [[3, 8, 9, 10], [4, 4, 4, 12, 9, 10]]
    suffix = [shared_suffix_length(a, b) for a, b in zip(student_prompts, teacher_prompts, strict=True)]
    assert suffix == [3, 3]
    with torch.no_grad():
        got = activation_distance(aligned_activations(tiny, tiny, student_prompts, suffix, [0], 0, torch.device("cpu")),
                                  aligned_activations(tiny, tiny, teacher_prompts, suffix, [0], 0, torch.device("cpu")))
        hand, d = 0.0, tiny.config.hidden_size
        for a, b, k in zip(student_prompts, teacher_prompts, suffix, strict=True):
            ha = tiny(input_ids=torch.tensor([a]), output_hidden_states=True).hidden_states[1][0]
            hb = tiny(input_ids=torch.tensor([b]), output_hidden_states=True).hidden_states[1][0]
            for j in range(1, k + 1):
                for x in range(d):
                    hand += (float(ha[-j, x]) - float(hb[-j, x])) ** 2 / d
    assert got.item() == pytest.approx(hand, rel=1e-5) and hand > 0


def test_the_loss_and_its_gradient_are_zero_when_the_prompts_are_identical(tiny):
    student, frozen = copy.deepcopy(tiny).train(), copy.deepcopy(tiny)
    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    suffix = [4, 3]
    with torch.no_grad():
        target = aligned_activations(frozen, frozen, prompts, suffix, [0, 1], 0, torch.device("cpu"))
    loss = activation_distance(aligned_activations(student, student, prompts, suffix, [0, 1], 0, torch.device("cpu")), target)
    loss.backward()
    assert loss.item() == 0.0
    grads = [p.grad for p in student.parameters() if p.grad is not None]
    assert grads and all(torch.count_nonzero(g) == 0 for g in grads)
    # a changed prompt gives a loss and a gradient
    student.zero_grad()
    moved = activation_distance(aligned_activations(student, student, [[1, 6, 7, 8], [9, 10, 11]], suffix, [0, 1], 0,
                                                    torch.device("cpu")), target)
    moved.backward()
    assert moved.item() > 0 and any(torch.count_nonzero(p.grad) for p in student.parameters() if p.grad is not None)


@pytest.mark.parametrize("family", ["organism-llama", "organism-qwen3", "organism-gpt2"])
def test_the_hooks_read_every_decoder_layer_of_each_family_with_and_without_lora(family):
    from peft import LoraConfig, get_peft_model

    from opct.models import load_for_inference

    model, _ = load_for_inference(family)
    layers = decoder_layers(model)
    assert len(layers) == model.config.num_hidden_layers
    wrapped = get_peft_model(copy.deepcopy(model), LoraConfig(r=2, target_modules="all-linear"))
    assert len(decoder_layers(wrapped)) == len(layers)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad(), residual_streams(wrapped, list(range(len(layers)))) as found:
        wrapped(input_ids=ids)
    assert [tuple(a.shape) for a in found] == [(1, 4, model.config.hidden_size)] * len(layers)
    with torch.no_grad():  # LoRA starts at zero: the wrapped model's streams are the base's
        plain = aligned_activations(model, model, [[1, 2, 3, 4]], [4], [0], 0, torch.device("cpu"))
    assert torch.allclose(found[0][0], plain[0], atol=1e-6)


def test_a_pair_whose_prompts_end_differently_is_an_error_naming_it():
    method = ACTMethod.__new__(ACTMethod)
    method.ctx = SimpleNamespace(render=lambda prompt: [ord(c) for c in (prompt if isinstance(prompt, str) else prompt[0]["content"])])
    pair = ConsistencyPair(id="odd-7", prompt="abc!", teacher_prompt="abc?")
    with pytest.raises(ConfigError, match="pair odd-7: its prompt and teacher_prompt share no final token"):
        method.setup([pair])
    assert method.suffix(ConsistencyPair(id="ok", prompt="xyz?", teacher_prompt="abc?")) == [ord("?")]


def _act_config(tiny_model, pairs_file, out, **kw) -> RunConfig:
    cfg = run_config(tiny_model, pairs_file, out, method="act", **kw)
    cfg.pop("opct", None)
    cfg.pop("bct", None)
    return RunConfig.model_validate(cfg)


def test_identical_prompts_train_with_zero_loss_and_zero_gradient(tiny_model, tmp_path):
    rows = [{**r, "teacher_prompt": r["prompt"]} for r in make_pairs()]
    pairs = tmp_path / "same.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = _act_config(tiny_model, pairs, tmp_path, **{"train.max_steps": 2})
    train(cfg, show_progress=False)
    metrics = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(m["loss"], m["grad_norm"]) for m in metrics] == [(0.0, 0.0), (0.0, 0.0)]


def test_act_resumes_exactly_after_an_interruption(tiny_model, pairs_file, tmp_path):
    whole = _act_config(tiny_model, pairs_file, tmp_path / "whole", **{"train.checkpoint_every": 1, "train.keep_checkpoints": 4})
    train(whole, show_progress=False)
    resumed = _act_config(tiny_model, pairs_file, tmp_path / "resumed", **{"train.checkpoint_every": 1, "train.keep_checkpoints": 4})
    shutil.copytree(whole.run_dir, resumed.run_dir)
    interrupt(resumed.run_dir, after_step=2)
    train(resumed, show_progress=False)
    a = load_file(str(whole.run_dir / "final" / "adapter_model.safetensors"))
    b = load_file(str(resumed.run_dir / "final" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    losses = [json.loads(line)["loss"] for line in (whole.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert losses == [json.loads(line)["loss"] for line in (resumed.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert losses[0] > 0


def test_act_declares_its_compute_nothing_generated_and_the_teacher_reads_what_it_trains_on(tiny_model, pairs_file, tmp_path):
    from opct.runs.compute import run_compute

    cfg = _act_config(tiny_model, pairs_file, tmp_path, **{"train.max_steps": 2})
    train(cfg, show_progress=False)
    manifest = json.loads((cfg.run_dir / "manifest.json").read_text())
    assert manifest["compute"] == {"generated": "none", "teacher_scored": "trained"}
    spent = run_compute(cfg.run_dir)
    assert spent["tokens_generated"] == 0
    assert spent["tokens_teacher_scored"] == spent["tokens_backpropagated"] > 0


def _mean_distance(student, reference, render, pairs, pad_id: int) -> float:
    """ACT's distance on ``pairs`` without training, per aligned position, layer and dimension: ``student`` on
    each ``prompt`` against ``reference`` on its ``teacher_prompt``, every layer, 32 pairs at a time."""
    layers = list(range(len(decoder_layers(student))))
    device = next(student.parameters()).device
    total = positions = 0.0
    with torch.no_grad():
        for start in range(0, len(pairs), 32):
            part = pairs[start : start + 32]
            prompts, teachers = [render(p.prompt) for p in part], [render(p.teacher_prompt) for p in part]
            suffix = [shared_suffix_length(a, b) for a, b in zip(prompts, teachers, strict=True)]
            assert 0 not in suffix
            s = aligned_activations(student, student, prompts, suffix, layers, pad_id, device)
            r = aligned_activations(reference, reference, teachers, suffix, layers, pad_id, device)
            total += float(activation_distance(s, r))
            positions += sum(suffix)
    return total / max(positions, 1.0)


def test_the_organism_act_config_lowers_the_activation_distance_on_held_out_pairs(tmp_path):
    from opct.models import load_spec_for_inference
    from opct.pairs import load_pair_source

    cfg = load_config(REPO / "configs" / "organism_act.yaml", [f"output_dir={tmp_path}", "train.max_steps=10",
                                                               "train.pairs_per_step=8", "train.checkpoint_every=10"])
    train(cfg, show_progress=False)
    held_out = load_pair_source("organism:sycophancy:heldout")[:32]
    base, tokenizer, render = load_spec_for_inference(cfg.model)
    trained, _, _ = load_spec_for_inference(type(cfg.model)(name_or_path=str(cfg.run_dir / "final")))
    pad = tokenizer.pad_token_id or 0
    before = _mean_distance(base, base, render, held_out, pad)
    after = _mean_distance(trained, base, render, held_out, pad)
    assert after < 0.9 * before, (before, after)


def test_ctm_conventions_match_a_hand_computation_of_ctms_loss(tiny):
    """``last_layer: after_norm`` reads the last layer at Hugging Face's ``hidden_states[-1]`` (after the final norm)
    and ``hidden_reduction: sum`` sums over the hidden dimension: together, CTM's loss (the mean over layers of
    the squared distance summed over the hidden dimension and averaged over positions) on one pair."""
    student, teacher = [5, 6, 7, 8, 9, 10], [3, 8, 9, 10]
    k, layers = shared_suffix_length(student, teacher), list(range(len(decoder_layers(tiny))))
    cpu = torch.device("cpu")
    with torch.no_grad():
        s = aligned_activations(tiny, tiny, [student], [k], layers, 0, cpu, last_after_norm=True)
        t = aligned_activations(tiny, tiny, [teacher], [k], layers, 0, cpu, last_after_norm=True)
        ours = activation_distance(s, t, "sum") / k  # the loop divides by the positions trained on
        hs = tiny(input_ids=torch.tensor([student]), output_hidden_states=True).hidden_states
        ht = tiny(input_ids=torch.tensor([teacher]), output_hidden_states=True).hidden_states
        ctm = sum(float(((hs[i][0, -k:] - ht[i][0, -k:]) ** 2).sum(-1).mean()) for i in range(1, len(hs))) / (len(hs) - 1)
        before = aligned_activations(tiny, tiny, [student], [k], layers, 0, cpu)
        mean_loss = activation_distance(before, aligned_activations(tiny, tiny, [teacher], [k], layers, 0, cpu))
        sum_loss = activation_distance(before, aligned_activations(tiny, tiny, [teacher], [k], layers, 0, cpu), "sum")
    assert ours.item() == pytest.approx(ctm, rel=1e-5)
    # only the last layer moves: before the norm it is the last decoder layer's output, not hidden_states[-1]
    assert torch.equal(s[:-1], before[:-1]) and not torch.allclose(s[-1], before[-1])
    assert sum_loss.item() == pytest.approx(tiny.config.hidden_size * mean_loss.item(), rel=1e-6)
    with pytest.raises(ValueError, match="hidden_reduction must be mean or sum"):
        activation_distance(s, t, "max")


def test_the_act_options_are_read_from_a_run_config():
    cfg = load_config(REPO / "configs" / "organism_act.yaml", ["act.last_layer=after_norm", "act.hidden_reduction=sum"])
    assert (cfg.method_config.last_layer, cfg.method_config.hidden_reduction) == ("after_norm", "sum")
    default = load_config(REPO / "configs" / "organism_act.yaml").method_config
    assert (default.last_layer, default.hidden_reduction) == ("before_norm", "mean")
    with pytest.raises(ConfigError, match="last_layer"):
        load_config(REPO / "configs" / "organism_act.yaml", ["act.last_layer=middle"])
