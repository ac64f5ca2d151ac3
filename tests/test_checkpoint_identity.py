"""A trained checkpoint knows its base model, its rendering settings and its base weights."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
import torch
from conftest import run_config


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory):
    """One LoRA step on a base given by a *relative* path, with template kwargs and a system prompt."""
    from conftest import make_pairs

    from opct.config import RunConfig
    from opct.training.loop import train

    root = tmp_path_factory.mktemp("identity")
    base = root / "base"
    shutil.copytree(tiny_model, base)
    pairs = root / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in make_pairs(4)), encoding="utf-8")
    tree = run_config(base, pairs, root / "runs", **{"train.max_steps": 1})
    tree["model"].update(name_or_path="base", chat_template_kwargs={"flavour": "plain"}, system_prompt="Be brief.")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        result = train(RunConfig.model_validate(tree), show_progress=False)
    finally:
        os.chdir(cwd)
    return root, result.run_dir.resolve()


def test_final_records_the_resolved_base_spec_and_a_card(trained):
    root, run_dir = trained
    record = json.loads((run_dir / "final" / "opct_checkpoint.json").read_text())
    assert record["base_model"] == str((root / "base").resolve())  # absolute, not "base"
    assert record["model"]["chat_template_kwargs"] == {"flavour": "plain"}
    assert record["model"]["system_prompt"] == "Be brief."
    assert re.fullmatch(r"[0-9a-f]{64}", record["base_weights_sha256"]) and record["data"]["pairs"] == 4  # the full sha256
    card = (run_dir / "final" / "README.md").read_text()
    assert "method: opct" in card and record["base_weights_sha256"] in card and "## Evaluation" in card


def test_a_moved_run_directory_still_loads_from_anywhere(trained, tmp_path, monkeypatch):
    from opct.models import checkpoint_spec, load_for_inference

    _, run_dir = trained
    moved = tmp_path / "elsewhere" / "run"
    shutil.copytree(run_dir, moved)
    monkeypatch.chdir(tmp_path)  # "base" does not exist relative to here
    model, tok = load_for_inference(str(moved))
    assert model is not None and tok is not None
    spec = checkpoint_spec(str(moved))
    assert spec is not None and spec.system_prompt == "Be brief."


def test_renderer_of_the_checkpoint_spec_gives_the_training_ids(trained):
    from opct.models import PromptRenderer, checkpoint_spec, load_tokenizer

    _, run_dir = trained
    spec = checkpoint_spec(str(run_dir))
    tok = load_tokenizer(str(run_dir / "final"))
    ids = PromptRenderer.for_model(tok, spec)([{"role": "user", "content": "hi"}])
    assert tok.decode(ids).startswith("<|system|>Be brief.")


def test_a_changed_base_is_refused_naming_both_hashes(trained, tmp_path):
    from safetensors.torch import load_file, save_file

    from opct.models import CheckpointError, load_for_inference

    root, run_dir = trained
    record = json.loads((run_dir / "final" / "opct_checkpoint.json").read_text())
    weights = root / "base" / "model.safetensors"
    backup = tmp_path / "model.safetensors"
    shutil.copy(weights, backup)
    try:
        tensors = load_file(weights)
        name = next(iter(tensors))
        tensors[name] = tensors[name] + torch.ones_like(tensors[name]) * 1e-3
        save_file(tensors, weights, metadata={"format": "pt"})
        with pytest.raises(CheckpointError) as info:
            load_for_inference(str(run_dir))
        assert record["base_weights_sha256"] in str(info.value) and "now holds" in str(info.value)
    finally:
        shutil.copy(backup, weights)


def test_eval_of_a_run_renders_exactly_the_training_ids(trained, tmp_path, monkeypatch):
    """``evaluate(<run dir>)`` renders each prompt with the run's template kwargs and system prompt,
    to the very ids the training loop rendered."""
    from opct.evals.contract import EvalTask, Judgement, Unit
    from opct.evals.suite import evaluate
    from opct.models import PromptRenderer, load_tokenizer
    from opct.sampling.hf_sampler import HFSampler
    from opct.stats.estimate import rate

    root, run_dir = trained
    seen: list[list[int]] = []
    original = HFSampler.generate

    def spy(self, prompts, params, sample_keys=None):
        seen.extend(prompts)
        return original(self, prompts, params, sample_keys)

    monkeypatch.setattr(HFSampler, "generate", spy)
    messages = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(3)]
    task = EvalTask(
        "ids", [Unit(str(i), "clean", m) for i, m in enumerate(messages)],
        lambda unit, response: Judgement(None, {"ok": True}, "t", "1"),
        lambda records: {"ok": rate(True for _ in records)}, max_new_tokens=2,
    )
    evaluate(str(run_dir), [task], tmp_path / "eval", show_progress=False)
    record = json.loads((run_dir / "final" / "opct_checkpoint.json").read_text())
    from opct.config import ModelConfig

    training = PromptRenderer.for_model(load_tokenizer(str(root / "base")), ModelConfig.model_validate(record["model"]))
    assert sorted(seen) == sorted(training(m) for m in messages)
    plain = load_tokenizer(str(root / "base")).apply_chat_template(messages[0], add_generation_prompt=True, tokenize=True)
    assert training(messages[0]) != list(plain)  # the system prompt is really there
    card = (tmp_path / "eval" / "model_card_eval.md").read_text()  # the checkpoint measured is never written into
    assert re.search(r"\| ids( \(INCOMPLETE\))? \| ok \| 1\.000 \|", card)  # the model card's eval section


def test_eval_results_are_tied_to_the_weights(tiny_model, tmp_path):
    """Results are reused only for the same weights; an --out holding another model's results is refused."""
    from safetensors.torch import load_file, save_file

    from opct.evals.contract import EvalTask, Judgement, Unit
    from opct.evals.suite import EvalOutputError, evaluate
    from opct.stats.estimate import rate

    def task():
        return EvalTask("t", [Unit("0", "clean", [{"role": "user", "content": "hello"}])],
                        lambda unit, response: Judgement(None, {"ok": True}, "t", "1"),
                        lambda records: {"ok": rate(True for _ in records)}, max_new_tokens=2)

    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    first = evaluate(str(model), [task()], tmp_path / "out", show_progress=False)["t"]
    again = evaluate(str(model), [task()], tmp_path / "out", show_progress=False)["t"]
    assert not first.reused and again.reused
    tensors = load_file(model / "model.safetensors")  # the same path, other weights
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 1e-2
    save_file(tensors, model / "model.safetensors", metadata={"format": "pt"})
    before = (tmp_path / "out" / "t" / "results.json").read_text()
    with pytest.raises(EvalOutputError, match="holds the results of"):
        evaluate(str(model), [task()], tmp_path / "out", show_progress=False)
    assert (tmp_path / "out" / "t" / "results.json").read_text() == before  # nothing overwritten
    fresh = evaluate(str(model), [task()], tmp_path / "out2", show_progress=False)["t"]
    assert not fresh.reused
