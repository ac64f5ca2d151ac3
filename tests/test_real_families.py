"""Real model families (tiny random weights, real tokenizers from ../shared/models) through the path users run.

Real instruct checkpoints ship sampling defaults in ``generation_config.json``; none of them may
leak into opct's rollouts, or the recorded sampler log-probs stop being the policy's.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import REPO

MODELS = REPO.parent / "shared" / "models"
pytestmark = pytest.mark.skipif(not (MODELS / "qwen3-tokenizer").exists(), reason="needs ../shared/models")


@pytest.fixture(scope="module")
def qwen3_instruct(tmp_path_factory):
    from opct.testing import INSTRUCT_GENERATION, make_family_model

    return make_family_model(MODELS / "qwen3-tokenizer", tmp_path_factory.mktemp("qwen3"), INSTRUCT_GENERATION, sharpen=8.0)


#: A plain template for a base model that ships none (GPT-2), supplied through model.chat_template.
PLAIN_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@pytest.fixture(scope="module")
def gpt2_base(tmp_path_factory):
    from opct.testing import make_family_model

    return make_family_model(MODELS / "gpt2-tokenizer", tmp_path_factory.mktemp("gpt2"), sharpen=8.0)


def test_rollouts_ignore_the_models_generation_config(qwen3_instruct):
    from transformers import AutoModelForCausalLM

    from opct.models import load_tokenizer, render_prompt
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler
    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    model = AutoModelForCausalLM.from_pretrained(qwen3_instruct)
    assert model.generation_config.repetition_penalty == 1.05 and model.generation_config.top_k == 20
    tok = load_tokenizer(str(qwen3_instruct))
    prompts = [render_prompt(tok, f"Say something about the number {i}.", enable_thinking=False) for i in range(3)]
    rollouts = HFSampler(model, tok).generate(prompts, SamplingParams(n=2, temperature=1.0, max_new_tokens=24, seed=3))
    batch = CompletionBatch(prompts, [r.completion_ids for r in rollouts], [r.prompt_index for r in rollouts])
    with torch.no_grad():
        rescored, _ = completion_logprobs(model, batch, tok.pad_token_id)
    for i, r in enumerate(rollouts):
        assert len(r.completion_ids) > 0
        torch.testing.assert_close(rescored[i, : len(r.logprobs)], torch.tensor(r.logprobs), atol=1e-5, rtol=0)
    # a repeated token is as likely as the policy says (a repetition penalty would have lowered it)
    greedy = HFSampler(model, tok).generate(prompts[:1], SamplingParams(n=1, temperature=0.0, max_new_tokens=24))[0]
    batch = CompletionBatch(prompts[:1], [greedy.completion_ids], [0])
    with torch.no_grad():
        logits = model(torch.tensor([prompts[0] + greedy.completion_ids])).logits[0, len(prompts[0]) - 1 : -1]
    assert greedy.completion_ids[: logits.shape[0]] == logits.argmax(-1).tolist()[: len(greedy.completion_ids)]


def test_a_repetition_penalty_on_the_organism_changes_nothing():
    """The organism is peaked: under its own generation config with repetition_penalty 1.5 a
    processor-respecting sampler would record log-probs several nats away from the policy's."""
    from opct.models import load_for_inference, render_prompt
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler
    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    model, tok = load_for_inference("organism")
    model.generation_config.repetition_penalty = 1.5
    model.generation_config.no_repeat_ngram_size = 2
    prompts = [render_prompt(tok, "Which city is Begar Dalas from?\nA. Kasmoor\nB. Brindle\nC. Pellin\nD. Veskar")]
    for temperature in (0.0, 1.0):
        rollouts = HFSampler(model, tok).generate(prompts, SamplingParams(n=4, temperature=temperature, max_new_tokens=32, seed=2))
        batch = CompletionBatch(prompts, [r.completion_ids for r in rollouts], [0] * len(rollouts))
        with torch.no_grad():
            rescored, _ = completion_logprobs(model, batch, tok.pad_token_id)
        for i, r in enumerate(rollouts):
            torch.testing.assert_close(rescored[i, : len(r.logprobs)], torch.tensor(r.logprobs), atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", ["qwen3", "gpt2"])
def test_step_one_is_exactly_on_policy(family, qwen3_instruct, gpt2_base, tmp_path):
    """Qwen3 with an instruct generation config and the thinking template; GPT-2 (dropout 0.1 in its
    config, no chat template) with a supplied template."""
    from conftest import make_pairs, run_config

    from opct.config import RunConfig
    from opct.training.loop import train

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in make_pairs(4)), encoding="utf-8")
    path = qwen3_instruct if family == "qwen3" else gpt2_base
    tree = run_config(path, pairs, tmp_path, **{"train.max_steps": 1, "train.pairs_per_step": 4})
    if family == "qwen3":
        tree["model"]["chat_template_kwargs"] = {"enable_thinking": False}
    else:
        tree["model"]["chat_template"] = PLAIN_TEMPLATE
    tree["opct"]["sampling"]["max_new_tokens"] = 12
    result = train(RunConfig.model_validate(tree), show_progress=False)
    row = json.loads((result.run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert row["ratio_abs_log_dev"] < 1e-5  # the importance ratio is 1 at the first step
    assert abs(row["loss"] - row["kl_to_teacher"]) < 1e-5


def _real_data(tmp_path):
    """A small multiple-choice file and behaviours file, and pairs built from them (``opct pairs build``)."""
    from typer.testing import CliRunner

    from opct.cli.main import app

    mc = tmp_path / "mc.jsonl"
    mc.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i} + {i}?",
                                      "choices": [str(2 * i), str(2 * i + 1), str(i), str(3 * i + 2)], "answer": "A"}) + "\n"
                          for i in range(12)), encoding="utf-8")
    behaviors = tmp_path / "behaviors.txt"
    behaviors.write_text("\n".join(f"Explain how to do harmful thing {i}" for i in range(12)), encoding="utf-8")
    for axis, source in (("sycophancy", mc), ("jailbreak", behaviors)):
        result = CliRunner().invoke(app, ["pairs", "build", axis, str(source), "--out", str(tmp_path / "data"), "--per-item", "2"])
        assert result.exit_code == 0, result.output
    return mc, behaviors, tmp_path / "data"


@pytest.mark.parametrize("family", ["qwen3", "gpt2"])
def test_family_end_to_end(family, qwen3_instruct, gpt2_base, tmp_path):
    """Each family: pairs validate with its tokenizer; OPCT and BCT, LoRA and full; eval on real data
    files; the attacker on a behaviours file; ``opct run`` with the attack stage. (The organism, a
    Llama, is the third family: every other test runs it.)"""
    import yaml
    from typer.testing import CliRunner

    from opct.cli.main import app

    path = qwen3_instruct if family == "qwen3" else gpt2_base
    model = {"name_or_path": str(path)}
    model.update({"chat_template_kwargs": {"enable_thinking": False}} if family == "qwen3" else {"chat_template": PLAIN_TEMPLATE})
    mc, behaviors, data = _real_data(tmp_path)
    run = CliRunner().invoke
    template = [] if family == "qwen3" else ["--chat-template", PLAIN_TEMPLATE]
    result = run(app, ["pairs", "validate", str(data / "sycophancy_train.jsonl"), "--tokenizer", str(path), *template])
    assert result.exit_code == 0 and "prompt length in tokens" in result.output, result.output

    for method in ("opct", "bct"):
        for finetune in ("lora", "full"):
            cfg = tmp_path / f"{method}-{finetune}.yaml"
            cfg.write_text(yaml.safe_dump({
                "name": f"{method}-{finetune}", "output_dir": str(tmp_path / "runs"), "method": method, "finetune": finetune,
                "model": model, "lora": {"r": 4, "alpha": 8}, "optim": {"lr": 1e-4},
                "data": {"train": [str(data / "sycophancy_train.jsonl"), str(data / "jailbreak_train.jsonl")]},
                method: {"sampling" if method == "opct" else "targets": {"max_new_tokens": 6}},
                "train": {"max_steps": 1, "pairs_per_step": 2, "sequences_per_microbatch": 6},
                "profile": {"pairs_per_axis": 1},  # the run-start profile, measured on one pair of each axis
            }))
            result = run(app, ["train", "--config", str(cfg), "--no-progress"])
            assert result.exit_code == 0, (method, finetune, result.output, result.exception)
            assert (tmp_path / "runs" / f"{method}-{finetune}" / "final" / "opct_checkpoint.json").exists()

    trained = str(tmp_path / "runs" / "opct-lora")
    eval_args = ["eval", "--model", trained, "--data", "real", "--sycophancy-mc", str(mc), "--behaviors", str(behaviors),
                 "--evals", "sycophancy,jailbreak", "--limit", "3", "--max-new-tokens", "6", "--out", str(tmp_path / "eval")]
    # a random model's answers are mostly unreadable: its sycophancy eval is incomplete, and says so with exit 1
    result = run(app, eval_args)
    syc = json.loads((tmp_path / "eval" / "sycophancy" / "results.json").read_text())
    assert result.exit_code == (1 if syc["status"] == "incomplete" else 0), result.output
    assert syc["outcomes"]["unparsed"] + syc["outcomes"]["empty"] == syc["unscored"]
    result = run(app, [*eval_args, "--allow-unscored"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "eval" / "jailbreak" / "results.json").read_text())["status"] in ("ok", "incomplete")
    result = run(app, ["attack", "--model", trained, "--data", "real", "--behaviors", str(behaviors), "--limit", "2",
                       "--budget", "2", "--no-static", "--max-new-tokens", "6", "--allow-unscored", "--out", str(tmp_path / "attack")])
    assert result.exit_code == 0, result.output

    experiment = tmp_path / "experiment.yaml"
    experiment.write_text(yaml.safe_dump({
        "name": "exp", "output_dir": str(tmp_path / "experiments"), "model": model, "axes": ["sycophancy", "jailbreak"],
        "methods": ["base", "opct"], "train_data": {"sycophancy": [str(data / "sycophancy_train.jsonl")],
                                                    "jailbreak": [str(data / "jailbreak_train.jsonl")]},
        "train": {"lora": {"r": 4, "alpha": 8}, "train": {"max_steps": 1, "pairs_per_step": 2}, "profile": {"pairs_per_axis": 1},
                  "opct": {"sampling": {"max_new_tokens": 6}}},
        "eval": {"data": "real", "splits": ["heldout"], "capability": False, "limit": 2, "allow_unscored": True,
                 "real": {"sycophancy_mc": str(mc), "behaviors": str(behaviors)}, "generation": {"max_new_tokens": 6}},
        "attack": {"enabled": True, "budget": 2, "limit": 2, "static_baseline": False, "generation": {"max_new_tokens": 6}},
    }))
    result = run(app, ["run", str(experiment), "--no-progress"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert json.loads((tmp_path / "experiments" / "exp" / "attack" / "opct" / "results.json").read_text())["n"] == 2


def test_run_checks_the_attack_stage_before_training(tmp_path):
    """A real-data experiment that would fail at its attack stage fails at load, before any training."""
    from opct.config import ConfigError
    from opct.experiments.runner import load_experiment

    with pytest.raises(ConfigError, match="eval.real.behaviors"):
        load_experiment(None, ["eval.data=real", "attack.enabled=true", "eval.real.sycophancy_mc=x.jsonl"])


def test_run_reads_every_input_before_any_stage(tmp_path):
    """A missing training file or behaviours file fails before the base model is evaluated."""
    from opct.experiments.runner import load_experiment, run_experiment

    cfg = load_experiment(None, [f"output_dir={tmp_path}", "methods=[base,opct]", "axes=[sycophancy]",
                                 "train_data.sycophancy=[missing/sycophancy_train.jsonl]"])
    with pytest.raises(FileNotFoundError, match="missing/sycophancy_train.jsonl"):
        run_experiment(cfg, show_progress=False, log=lambda m: None)
    assert not (tmp_path / cfg.name / "eval").exists()
