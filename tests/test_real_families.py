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
    from opct.rollout import HFSampler, SamplingParams
    from opct.scoring import CompletionBatch, completion_logprobs

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
    from opct.rollout import HFSampler, SamplingParams
    from opct.scoring import CompletionBatch, completion_logprobs

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
    from opct.train import train

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
