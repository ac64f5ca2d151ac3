"""lm-eval-harness's ``hf`` model (``HFLM``) loads opct's trained checkpoints and scores what opct scores.

Two real runs on the tiny Llama (two steps each): LoRA, started from a base given by a *relative*
path with its own chat template and a system prompt, and full fine-tuning. Each checkpoint is loaded
the way docs/inspect-lm-eval.md says (full ``final/``: ``pretrained=<final>``; LoRA ``final/``:
``pretrained=<base>,peft=<final>,tokenizer=<final>``; an ``opct export``: ``pretrained=<export>``) and
must give, on a chat-rendered prompt, the log-likelihood that opct's own loaded model gives on the
token ids opct renders (within 1e-4), and not the base model's.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from conftest import make_pairs, run_config
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from typer.testing import CliRunner

#: Not the tiny base's template: a tokenizer taken from the base instead of final/ renders other ids.
TEMPLATE = ("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
SYSTEM = "Answer with a number."
QUESTION = [{"role": "user", "content": "What is 3 + 3?"}]
ANSWER = "6<|end|>"


def _train(root: Path, finetune: str, **overrides: object) -> Path:
    from opct.config import RunConfig
    from opct.training.loop import train

    tree = run_config(Path("base"), root / "pairs.jsonl", root / "runs" / finetune,
                      **{"train.max_steps": 2, "finetune": finetune, **overrides})
    return train(RunConfig.model_validate(tree), show_progress=False).run_dir.resolve()


@pytest.fixture(scope="module")
def runs(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``lora`` and ``full``: finished run directories; ``base``: the base model's folder."""
    root = tmp_path_factory.mktemp("lmeval")
    shutil.copytree(tiny_model, root / "base")
    (root / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in make_pairs(4)), encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(root)  # the base is "base", relative to the training's working directory
    try:
        lora = _train(root, "lora", **{"model.chat_template": TEMPLATE, "model.system_prompt": SYSTEM})
        full = _train(root, "full", **{"optim.lr": 1e-3})
    finally:
        os.chdir(cwd)
    return {"lora": lora, "full": full, "base": root / "base"}


def _hflm(**model_args: str) -> HFLM:
    return HFLM(device="cpu", batch_size=1, **model_args)


def _loglikelihood(lm: HFLM, context: str, continuation: str) -> tuple[float, bool]:
    request = Instance(request_type="loglikelihood", doc={}, arguments=(context, continuation), idx=0)
    return lm.loglikelihood([request], disable_tqdm=True)[0]


def _opct_loglikelihood(model_spec: str, weights: str | None = None) -> tuple[float, bool]:
    """The log-likelihood of ``ANSWER`` after ``QUESTION`` as opct renders and scores it: the prompt
    ids of ``model_spec``'s recorded settings, the weights of ``weights`` (default: the same)."""
    from opct.models import PromptRenderer, inference_spec, load_for_inference
    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    spec = inference_spec(model_spec)
    model, tokenizer = load_for_inference(weights or model_spec, chat_template=spec.chat_template)
    prompt = PromptRenderer.for_model(tokenizer, spec)(QUESTION)
    answer = tokenizer.encode(ANSWER, add_special_tokens=False)
    batch = CompletionBatch([prompt], [answer], [0])
    with torch.no_grad():
        logprobs, _ = completion_logprobs(model, batch, tokenizer.pad_token_id)
        logits = model(torch.tensor([prompt + answer])).logits[0, len(prompt) - 1 : -1]
    return float(logprobs.sum()), bool((logits.argmax(-1) == torch.tensor(answer)).all())


def _messages(system: str | None) -> list[dict[str, str]]:
    """``QUESTION`` as lm-eval gets it: a run's system prompt is lm-eval's ``--system_instruction``."""
    return [{"role": "system", "content": system}, *QUESTION] if system else QUESTION


def _check(lm: HFLM, run_dir: Path, system: str | None) -> float:
    """lm-eval renders the run's training ids and scores ``ANSWER`` as opct does; returns its log-likelihood."""
    from opct.models import PromptRenderer, checkpoint_spec, load_tokenizer

    context = lm.apply_chat_template(_messages(system))
    spec = checkpoint_spec(str(run_dir))
    assert spec is not None
    training_ids = PromptRenderer.for_model(load_tokenizer(str(run_dir / "final")), spec)(QUESTION)
    assert lm.tok_encode(context) == training_ids
    got = _loglikelihood(lm, context, ANSWER)
    want = _opct_loglikelihood(str(run_dir))
    assert got[0] == pytest.approx(want[0], abs=1e-4) and got[1] == want[1]
    return got[0]


def _base_loglikelihood(runs: dict[str, Path], run: str) -> float:
    """The base model's log-likelihood of the same ids (the run's rendering, the base's weights)."""
    return _opct_loglikelihood(str(runs[run]), weights=str(runs["base"]))[0]


def test_a_full_final_loads_with_pretrained(runs):
    lm = _hflm(pretrained=str(runs["full"] / "final"))
    assert type(lm.model).__name__ == "LlamaForCausalLM"
    score = _check(lm, runs["full"], system=None)
    assert abs(score - _base_loglikelihood(runs, "full")) > 1e-3  # the trained weights, not the base's


def test_a_lora_final_loads_as_peft_on_the_base_its_adapter_config_names(runs, tmp_path, monkeypatch):
    final = runs["lora"] / "final"
    base = json.loads((final / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert base == str(runs["base"].resolve())  # absolute, though training was given "base"
    monkeypatch.chdir(tmp_path)  # where "base" means nothing
    lm = _hflm(pretrained=base, peft=str(final), tokenizer=str(final))
    assert type(lm.model).__name__ == "PeftModelForCausalLM"
    score = _check(lm, runs["lora"], system=SYSTEM)
    assert abs(score - _base_loglikelihood(runs, "lora")) > 1e-3
    card = (final / "README.md").read_text()
    assert f"pretrained={base},peft=<this folder>,tokenizer=<this folder>" in card


def test_the_base_tokenizer_would_not_render_the_training_ids(runs):
    """Why ``tokenizer=<final>``: the run trained with a chat template its base does not have."""
    from opct.models import PromptRenderer, checkpoint_spec, load_tokenizer

    spec = checkpoint_spec(str(runs["lora"]))
    training_ids = PromptRenderer.for_model(load_tokenizer(str(runs["lora"] / "final")), spec)(QUESTION)
    lm = _hflm(pretrained=str(runs["base"]), peft=str(runs["lora"] / "final"))
    assert lm.tok_encode(lm.apply_chat_template(_messages(SYSTEM))) != training_ids


def test_an_exported_lora_run_loads_with_pretrained_alone(runs, tmp_path):
    from opct.cli.main import app

    out = tmp_path / "merged"
    res = CliRunner().invoke(app, ["export", str(runs["lora"]), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert not (out / "adapter_config.json").exists() and (out / "config.json").exists()
    record = json.loads((out / "opct_checkpoint.json").read_text())
    assert record["merged_from"] == f"{runs['lora'].name}/final" and record["model"]["system_prompt"] == SYSTEM
    assert "pretrained=<this folder>" in (out / "README.md").read_text()
    lm = _hflm(pretrained=str(out))
    assert type(lm.model).__name__ == "LlamaForCausalLM"
    assert _check(lm, runs["lora"], system=SYSTEM) == pytest.approx(_opct_loglikelihood(str(out))[0], abs=1e-4)

    again = CliRunner().invoke(app, ["export", str(runs["lora"]), "--out", str(out)])
    assert again.exit_code == 2 and "not empty" in again.output
    inside = CliRunner().invoke(app, ["export", str(runs["lora"]), "--out", str(runs["lora"] / "final" / "m")])
    assert inside.exit_code == 2 and "inside the checkpoint" in inside.output
    assert not (runs["lora"] / "final" / "m").exists()


def test_the_organism_task_runs_in_lm_eval_and_scores_as_opct_does(tmp_path):
    """``opct organism lm-eval-task`` writes a task lm-eval runs offline; on the shipped organism, which
    knows its world's facts, every question is answered right, with opct's own log-likelihoods."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from opct.cli.organism import organism_app
    from opct.models import PromptRenderer, inference_spec, load_for_inference, resolve_model_path
    from opct.organism.lm_eval_task import TASK
    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    res = CliRunner().invoke(organism_app, ["lm-eval-task", "--out", str(tmp_path), "--limit", "4"])
    assert res.exit_code == 0, res.output
    organism = resolve_model_path("organism")
    result = simple_evaluate(model=_hflm(pretrained=organism), tasks=[TASK], apply_chat_template=True,
                             task_manager=TaskManager(include_path=str(tmp_path)), log_samples=True)
    assert result["results"][TASK]["acc,none"] == 1.0
    samples = result["samples"][TASK]
    assert len(samples) == 4 and all(len(s["resps"]) == 4 for s in samples)

    model, tokenizer = load_for_inference("organism")
    render = PromptRenderer.for_model(tokenizer, inference_spec("organism"))
    for sample in samples:
        doc = sample["doc"]
        prompt = render([{"role": "user", "content": doc["question"]}])
        answer = tokenizer.encode(doc["choices"][doc["gold"]], add_special_tokens=False)
        with torch.no_grad():
            logprobs, _ = completion_logprobs(model, CompletionBatch([prompt], [answer], [0]), tokenizer.pad_token_id)
        assert sample["resps"][doc["gold"]][0][0] == pytest.approx(float(logprobs.sum()), abs=1e-4)
