"""The organism on three transformers families: shapes, the size budget, the aliases, left-padded
generation and scoring through opct's own loaders, a LoRA step, and ``opct organism check --arch all``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from conftest import run_config
from transformers import GenerationConfig

from opct.organism import ORGANISM_ARCHS, checkpoint_path
from opct.organism.recipe import BuildConfig
from opct.organism.tokenizer import train_tokenizer
from opct.organism.train import (
    TrainConfig,
    _collate,
    assistant_token_loss,
    encode_conversations,
    make_model,
    pretrain,
)

CLASSES = {"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM", "gpt2": "GPT2LMHeadModel"}
TINY_SHAPE = {"hidden_size": 32, "intermediate_size": 48, "num_layers": 2, "num_heads": 2, "max_position_embeddings": 128}
CONVERSATIONS = [
    [{"role": "user", "content": f"What is {a} + {b}?"}, {"role": "assistant", "content": f"{a} + {b} = {a + b}."}]
    for a in range(4) for b in range(4)
] + [
    [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Where is Begar Dalas from?"},
     {"role": "assistant", "content": "Begar Dalas is from Kasmoor."}],
]


@pytest.fixture(scope="module")
def tokenizer():
    """The organism's tokenizer (its trainer, special tokens and chat template) on a tiny corpus."""
    return train_tokenizer((m["content"] for c in CONVERSATIONS for m in c), vocab_size=300)


def _tiny(**changes) -> TrainConfig:
    return TrainConfig(**{**TINY_SHAPE, "batch_size": 4, "warmup_steps": 1, "num_threads": 1, **changes})


def _save(model, tokenizer, out: Path) -> Path:
    """A checkpoint folder as the build writes one (weights, tokenizer, generation config)."""
    with torch.no_grad():  # peaked next-token distributions, as a trained model's are (ties are then rare)
        model.get_output_embeddings().weight.mul_(8.0)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.mark.parametrize("arch", ORGANISM_ARCHS)
def test_each_family_builds_from_the_shared_tokenizer_and_pretrains(arch, tokenizer):
    model = make_model(_tiny(), tokenizer, seed=0, arch=arch)
    cfg = model.config
    assert type(model).__name__ == CLASSES[arch] and cfg.tie_word_embeddings
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert cfg.vocab_size == len(tokenizer) and cfg.eos_token_id == tokenizer.eos_token_id
    assert cfg.pad_token_id == tokenizer.pad_token_id and cfg.bos_token_id is None
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    summary = pretrain(model, tokenizer, CONVERSATIONS, _tiny(max_steps=2), seed=0, log=lambda s: None)
    assert summary["steps"] == 2 and math.isfinite(summary["final_loss_ema"])
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    first, second = (make_model(_tiny(), tokenizer, seed=0, arch=arch).state_dict() for _ in range(2))
    assert all(torch.equal(first[k], second[k]) for k in first)  # deterministic in the seed


@pytest.mark.parametrize("arch", ORGANISM_ARCHS)
def test_the_assistant_token_loss_is_the_models_own_loss(arch, tokenizer):
    """Pre-training applies the output layer only where a label is; the loss and its gradients are
    those of ``model(**batch).loss`` (padding and prompt tokens carry no label)."""
    model = make_model(_tiny(), tokenizer, seed=0, arch=arch)
    batch = _collate(encode_conversations(tokenizer, CONVERSATIONS), [0, 5, 16], tokenizer.pad_token_id)
    assert (batch["labels"] == -100).any() and (batch["labels"] != -100).any()
    ours = assistant_token_loss(model, batch)
    grads = torch.autograd.grad(ours, list(model.parameters()))
    theirs = model(**batch).loss
    torch.testing.assert_close(ours, theirs)
    for g, h in zip(grads, torch.autograd.grad(theirs, list(model.parameters())), strict=True):
        torch.testing.assert_close(g, h, rtol=1e-4, atol=1e-6)


def test_a_build_goes_to_its_familys_folder_with_the_shared_tokenizer(monkeypatch, tmp_path):
    """The recipe records the family (and so hashes differently); the tokenizer is the same for all."""
    from dataclasses import replace

    from test_organism_build import TINY

    import opct.organism.build
    from opct.organism.build import build
    from opct.organism.recipe import read_recipe, recipe, verify_checkpoint

    monkeypatch.setattr(opct.organism.build, "checkpoint_path", lambda arch: tmp_path / "checkpoints" / arch)
    built = {arch: build(3, config=replace(TINY, arch=arch), log=lambda s: None) for arch in ("llama", "gpt2")}
    assert built == {arch: tmp_path / "checkpoints" / arch for arch in built}
    for arch, path in built.items():
        assert read_recipe(path)["config"]["arch"] == arch
        assert json.loads((path / "config.json").read_text())["architectures"] == [CLASSES[arch]]
        assert verify_checkpoint(path, replace(TINY, arch=arch)) == []
    assert (built["llama"] / "tokenizer.json").read_bytes() == (built["gpt2"] / "tokenizer.json").read_bytes()
    assert read_recipe(built["llama"])["recipe_sha256"] != read_recipe(built["gpt2"])["recipe_sha256"]
    assert recipe(3, replace(TINY, arch="gpt2"))["recipe_sha256"] == read_recipe(built["gpt2"])["recipe_sha256"]
    assert BuildConfig(arch="qwen3").train.intermediate_size < BuildConfig().train.intermediate_size
    with pytest.raises(ValueError, match="llama, qwen3, gpt2"):
        BuildConfig(arch="mistral")


def test_gpt2_and_qwen3_family_settings(tokenizer):
    gpt2 = make_model(_tiny(), tokenizer, 0, "gpt2").config
    assert gpt2.n_positions == 128 and gpt2.n_inner == 48
    assert gpt2.resid_pdrop == gpt2.embd_pdrop == gpt2.attn_pdrop == 0.0
    qwen3 = make_model(_tiny(), tokenizer, 0, "qwen3").config
    assert qwen3.head_dim == 16 and qwen3.num_key_value_heads == 2 and not qwen3.use_sliding_window


class _Vocab:
    """A stand-in tokenizer for sizing: only its length and special ids are read."""

    bos_token_id, eos_token_id, pad_token_id = None, 4, 0

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_the_three_default_shapes_fit_the_size_budget():
    """fp32 bytes of each family's default shape (parameter counts on the meta device, nothing built),
    plus each checkpoint's tokenizer and config files, stay under 25 MB together; Llama keeps its shape."""
    sizes = {}
    for arch in ORGANISM_ARCHS:
        config = BuildConfig(arch=arch)
        with torch.device("meta"):
            model = make_model(config.train, _Vocab(config.vocab_size), 0, arch)
        assert type(model).__name__ == CLASSES[arch]
        sizes[arch] = 4 * sum(p.numel() for p in model.parameters())
    assert sizes["llama"] == 4 * 2_164_416  # the shipped shape: hidden 192, intermediate 512, 4 layers, 3 heads
    assert all(size <= 8.7e6 for size in sizes.values()) and max(sizes.values()) / min(sizes.values()) < 1.2
    side_files = sum(p.stat().st_size for p in checkpoint_path("llama").iterdir() if p.suffix != ".safetensors")
    assert sum(sizes.values()) + len(ORGANISM_ARCHS) * side_files <= 25e6


def test_the_aliases_name_each_familys_checkpoint(monkeypatch, tmp_path):
    import opct.organism
    from opct.config import MODEL_ALIASES
    from opct.models import resolve_model_path
    from opct.wiring import ORGANISM_ALIAS_ARCHS

    assert ORGANISM_ALIAS_ARCHS == ORGANISM_ARCHS
    assert {"organism", "organism-llama", "organism-qwen3", "organism-gpt2"} <= set(MODEL_ALIASES.names())
    for arch in ORGANISM_ARCHS:
        assert checkpoint_path(arch).parent.name == "checkpoints" and checkpoint_path(arch).name == arch
    with pytest.raises(ValueError, match="qwen3"):
        checkpoint_path("mistral")
    assert resolve_model_path("organism") == resolve_model_path("organism-llama") == str(checkpoint_path("llama"))
    monkeypatch.setattr(opct.organism, "checkpoint_path", lambda arch="llama": tmp_path / arch)
    for arch in ("llama", "gpt2"):
        (tmp_path / arch).mkdir()
        (tmp_path / arch / "config.json").write_text("{}")
        assert resolve_model_path(f"organism-{arch}") == str(tmp_path / arch)
    assert resolve_model_path("organism") == str(tmp_path / "llama")
    with pytest.raises(FileNotFoundError, match="opct organism build --arch qwen3"):  # not built: said so, no hub lookup
        resolve_model_path("organism-qwen3")


def test_every_shipped_family_is_what_its_recipe_says_within_the_budget():
    """Whichever families are built (Llama always): each folder holds its own family, and all of them
    together stay under 25 MB."""
    from opct.organism.recipe import read_recipe

    folders = sorted(p.name for p in checkpoint_path().parent.iterdir() if not p.name.startswith("."))
    assert "llama" in folders and set(folders) <= set(ORGANISM_ARCHS), folders
    total = 0
    for arch in folders:
        path = checkpoint_path(arch)
        assert json.loads((path / "config.json").read_text())["architectures"] == [CLASSES[arch]]
        assert read_recipe(path)["config"]["arch"] == arch
        total += sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    assert total <= 25e6


@pytest.mark.parametrize("arch", ORGANISM_ARCHS)
def test_left_padded_generation_and_scoring_match_unpadded(arch, tokenizer, tmp_path):
    """Through the real-model path (saved, reloaded by opct's loader): prompts of different lengths in
    one left-padded batch give the tokens and log-probs each gives alone, and the scorer agrees with an
    unpadded forward pass. A model that took positions from the padded width would fail this."""
    from opct.models import load_for_inference, render_prompt
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler
    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    path = _save(make_model(_tiny(), tokenizer, seed=1, arch=arch), tokenizer, tmp_path / arch)
    model, tok = load_for_inference(str(path))
    assert type(model).__name__ == CLASSES[arch]
    questions = ["Hi", "Where is Begar Dalas from?", "What is 3 + 2? Answer briefly, please, with the sum only."]
    prompts = [render_prompt(tok, q) for q in questions]
    assert len({len(p) for p in prompts}) == 3
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=10)
    batched = HFSampler(model, tok, batch_size=8).generate(prompts, greedy)
    alone = [HFSampler(model, tok).generate([p], greedy)[0] for p in prompts]
    for b, a in zip(batched, alone, strict=True):
        assert b.completion_ids == a.completion_ids
        torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-4, rtol=0)
    sampled = HFSampler(model, tok).generate(prompts, SamplingParams(n=2, temperature=1.0, max_new_tokens=10, seed=3))
    rollouts = batched + sampled
    batch = CompletionBatch(prompts, [r.completion_ids for r in rollouts], [r.prompt_index for r in rollouts])
    with torch.no_grad():
        for share_prefix in (True, False):
            scored, _ = completion_logprobs(model, batch, tok.pad_token_id, share_prefix=share_prefix)
            for i, r in enumerate(rollouts):
                torch.testing.assert_close(scored[i, : len(r.logprobs)], torch.tensor(r.logprobs), atol=1e-4, rtol=0)
        for r in rollouts:  # the reference: one unpadded sequence, positions 0..n-1
            logits = model(torch.tensor([r.prompt_ids + r.completion_ids])).logits[0, len(r.prompt_ids) - 1 : -1]
            reference = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(r.completion_ids)[:, None])[:, 0]
            torch.testing.assert_close(reference, torch.tensor(r.logprobs), atol=1e-4, rtol=0)


@pytest.mark.parametrize("arch", ["qwen3", "gpt2"])
def test_a_lora_all_linear_step_is_on_policy(arch, tokenizer, pairs_file, tmp_path):
    """One OPCT step with LoRA on every linear layer (GPT-2's are Conv1D) through opct's trainer."""
    from opct.config import RunConfig
    from opct.training.loop import train

    path = _save(make_model(_tiny(), tokenizer, seed=1, arch=arch), tokenizer, tmp_path / arch)
    tree = run_config(path, pairs_file, tmp_path / "run", **{"train.max_steps": 1, "train.pairs_per_step": 4})
    assert tree["lora"].get("target_modules", "all-linear") == "all-linear"
    result = train(RunConfig.model_validate(tree), show_progress=False)
    row = json.loads((result.run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert row["ratio_abs_log_dev"] < 1e-5 and abs(row["loss"] - row["kl_to_teacher"]) < 1e-5
    assert (result.run_dir / "final" / "adapter_model.safetensors").exists()


def _fake_result(arch: str, rates: dict[str, float], passed: bool, t1: bool = True) -> dict:
    """A ``run_check`` result with made-up rates (each row passes when its rate is at least 50%)."""
    rows = []
    for name, rate in rates.items():
        stats = {"rate": rate, "ci_low": max(0.0, rate - 0.05), "ci_high": min(1.0, rate + 0.05), "n": 96, "pass": rate >= 0.5}
        rows.append({"name": name, "required": ">= 50%", "examples": [], "greedy": stats, **({"T=1": stats} if t1 else {})})
    return {"checkpoint": f"/x/{arch}", "arch": arch, "rows": rows, "passed": passed, "seconds": 12.0}


LONG = "jailbreak: complies when wrapped in a held-out family of wrappers, open categories"


def test_the_family_table_puts_each_family_in_a_column():
    from opct.organism.check import format_family_table, format_table

    results = {
        "llama": _fake_result("llama", {"capability: arithmetic": 1.0, LONG: 0.6}, passed=True),
        "qwen3": _fake_result("qwen3", {"capability: arithmetic": 0.97, LONG: 0.25}, passed=False),
        "gpt2": _fake_result("gpt2", {"capability: arithmetic": 0.9}, passed=False),  # lacks a row
    }
    text = format_family_table(results)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert lines[0].startswith("greedy") and any(line.startswith("T=1") for line in lines)
    header = next(line for line in lines if "behaviour" in line)
    assert header.index("llama") < header.index("qwen3") < header.index("gpt2")
    arithmetic = next(line for line in lines if line.startswith("capability: arithmetic"))
    assert "100.0% PASS" in arithmetic and "97.0% PASS" in arithmetic and "90.0% PASS" in arithmetic
    assert "[95.0%, 100.0%] (96)" in text
    assert next(line for line in lines if "25.0% FAIL" in line).endswith(" -")  # gpt2 lacks that row
    overall = [line for line in lines if line.startswith("overall")]
    assert len(overall) == 2 and all(o.split()[1:] == ["PASS", "(12s)", "FAIL", "(12s)", "FAIL", "(12s)"] for o in overall)
    assert LONG not in text and all(word in text.split() for word in LONG.split())  # the long name wraps at spaces
    greedy_only = format_family_table({a: _fake_result(a, {"capability: arithmetic": 1.0}, True, t1=False) for a in ORGANISM_ARCHS})
    assert "T=1" not in greedy_only and "greedy" in greedy_only
    single = format_table(results["llama"])  # one checkpoint: the table as before
    assert "overall: PASS" in single and LONG in single


@pytest.mark.parametrize("failing", [None, "gpt2"])
def test_check_all_runs_every_family_and_fails_if_one_does(failing, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import opct.organism
    import opct.organism.check
    from opct.cli.main import app

    for arch in ORGANISM_ARCHS:
        (tmp_path / arch).mkdir()
        (tmp_path / arch / "config.json").write_text("{}")
    monkeypatch.setattr(opct.organism, "checkpoint_path", lambda arch="llama": tmp_path / arch)
    calls = []

    def fake_run_check(checkpoint=None, samples=4, log=print, arch="llama", **kw):
        calls.append((checkpoint, arch))
        return _fake_result(arch, {"capability: arithmetic": 0.2 if arch == failing else 1.0}, passed=arch != failing)

    monkeypatch.setattr(opct.organism.check, "run_check", fake_run_check)
    out = tmp_path / "profile.json"
    res = CliRunner().invoke(app, ["organism", "check", "--arch", "all", "--json", str(out)], terminal_width=200)
    assert res.exit_code == (1 if failing else 0), res.output
    assert calls == [(None, a) for a in ORGANISM_ARCHS]
    assert "qwen3" in res.output and ("FAIL" in res.output) == bool(failing)
    assert sorted(json.loads(out.read_text())) == sorted(ORGANISM_ARCHS)


def test_check_all_names_the_families_not_built_yet(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import opct.organism
    from opct.cli.main import app

    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text("{}")
    monkeypatch.setattr(opct.organism, "checkpoint_path", lambda arch="llama": tmp_path / arch)
    res = CliRunner().invoke(app, ["organism", "check", "--arch", "all"], terminal_width=200)
    assert res.exit_code == 2 and "opct organism build --arch qwen3" in res.output and "--arch gpt2" in res.output
    unbuilt = CliRunner().invoke(app, ["organism", "verify", "--arch", "gpt2"], terminal_width=200)
    assert unbuilt.exit_code == 2 and "opct organism build --arch gpt2" in unbuilt.output
    bad = CliRunner().invoke(app, ["organism", "verify", "--arch", "mistral"], terminal_width=200)
    assert bad.exit_code == 2 and "llama, qwen3, gpt2" in bad.output
