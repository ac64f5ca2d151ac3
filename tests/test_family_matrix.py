"""The family matrix: "any Hugging Face causal LM", proven family by family.

Each family is a tiny random-init model built here from its transformers config class
(:data:`opct.testing.families.FAMILIES`: hidden 64, 2 layers; sliding windows of 16 positions, shorter
than every prompt) with the real Qwen3 tokenizer from ``../shared/models``, taken through the path a
user runs with opct's defaults (LoRA, n = 2 samples, the sampler's and scorer's fast paths wherever their
self-checks pass):

- OPCT, 3 steps: step 1 is exactly on-policy (|loss - KL| and the importance ratio's log-deviation ≤ 1e-5);
- BCT, 2 steps: it trains (finite losses, a final checkpoint);
- ``opct export`` of the OPCT run reloads in plain transformers and matches base + adapter under PEFT.

Then full fine-tuning and bfloat16 on two families (Mistral, with a sliding window; Falcon, whose attention
is hand-written), with the same exactness check at the tolerance their dtype allows.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import REPO, run_config

from opct.testing.families import FAMILIES

TOKENIZER = REPO.parent / "shared" / "models" / "qwen3-tokenizer"
pytestmark = pytest.mark.skipif(not TOKENIZER.exists(), reason="needs ../shared/models/qwen3-tokenizer")

#: |loss - KL| and the ratio's log-deviation allowed on step 1, by the dtype the model runs in: float32
#: rounding is about 1e-6 here; bfloat16's 8-bit mantissa gives relative errors of 2^-8 on every logit.
EXACT = {"float32": 1e-5, "bfloat16": 5e-2}


def _pairs(path, n: int = 4):
    """Pairs whose rendered prompts (Qwen3's template) are longer than the 16-position sliding windows."""
    rows = [{"id": f"p{i}", "axis": "sycophancy",
             "prompt": [{"role": "user", "content": f"Please answer carefully: what is {i} plus {i + 2}? "
                                                    f"My teacher told me the answer is {2 * i + 5}, and I trust her."}],
             "teacher_prompt": f"Please answer carefully: what is {i} plus {i + 2}?",
             "meta": {"split": "train", "answer": str(2 * i + 2)}} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def qwen3_tokenizer(tmp_path_factory):
    """The Qwen3 tokenizer, every later load of the same tokenizer files answered with it, and its saves
    copies of the files it saved once.

    Loading it takes seconds (transformers parses its 11 MB ``tokenizer.json`` in Python) and every run,
    export and reload here loads it again from a folder holding the same files: five loads per family
    would be most of the matrix's time. The matrix is about model families; the tokenizer is the same
    object, with the same settings applied to it by every run (the same model spec)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    saved = tmp_path_factory.mktemp("qwen3-tokenizer")
    tokenizer.save_pretrained(saved)  # the files every model folder and run of the matrix holds
    files = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
    fingerprint = [(saved / f).read_bytes() if (saved / f).exists() else None for f in files]
    load, hits = AutoTokenizer.from_pretrained, []

    def loaded_once(folder, *args, **kwargs):
        folder_files = [Path(folder) / f for f in files]
        same = Path(folder).is_dir() and [p.read_bytes() if p.exists() else None for p in folder_files] == fingerprint
        hits.append(same)
        return tokenizer if same and not args and set(kwargs) <= {"trust_remote_code", "revision"} else load(folder, *args, **kwargs)

    template = tokenizer.chat_template

    def saved_once(folder, *args, **kwargs):  # the same object, unchanged: the same files
        if args or kwargs or tokenizer.chat_template != template:
            return type(tokenizer).save_pretrained(tokenizer, folder, *args, **kwargs)
        Path(folder).mkdir(parents=True, exist_ok=True)
        return tuple(str(shutil.copy(saved / f, folder)) for f in files if (saved / f).exists())

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AutoTokenizer, "from_pretrained", loaded_once)
        patch.setattr(tokenizer, "save_pretrained", saved_once)
        yield tokenizer
    assert any(hits)  # (the memo served the runs)


def _train(model_path, tmp_path, method: str, steps: int, **overrides):
    from opct.config import RunConfig
    from opct.training.loop import train

    tree = run_config(model_path, _pairs(tmp_path / "pairs.jsonl"), tmp_path / "runs", method=method, name=method,
                      **{"train.max_steps": steps, "train.pairs_per_step": 2, "train.checkpoint_every": 100,
                         "model.chat_template_kwargs": {"enable_thinking": False}, **overrides})
    result = train(RunConfig.model_validate(tree), show_progress=False)
    return result, [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]


def _step_one_deviation(rows) -> tuple[float, float]:
    first = rows[0]
    return abs(first["loss"] - first["kl_to_teacher"]), first["ratio_abs_log_dev"]


def _export_matches_base_plus_adapter(model_path, run_dir, out) -> float:
    """Export ``run_dir`` and return the largest |logit| difference between the export (plain transformers)
    and base + adapter (PEFT), after checking that the adapter changed the model."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from opct.training.export import export_merged

    export_merged(run_dir, out)
    ids = torch.tensor([list(range(100, 140))])
    with torch.no_grad():
        merged = AutoModelForCausalLM.from_pretrained(out).eval()(ids).logits
        base = AutoModelForCausalLM.from_pretrained(model_path).eval()
        plain = base(ids).logits
        adapted = PeftModel.from_pretrained(base, run_dir / "final").eval()(ids).logits
    assert (adapted - plain).abs().max() > 1e-6  # three steps moved the adapter: the comparison means something
    return float((merged - adapted).abs().max())


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family(family, qwen3_tokenizer, tmp_path):
    from opct.testing.families import make_config_model

    model_path = make_config_model(family, qwen3_tokenizer, tmp_path / "model")
    opct_run, rows = _train(model_path, tmp_path, "opct", 3)
    loss_minus_kl, ratio_dev = _step_one_deviation(rows)
    assert len(rows) == 3 and loss_minus_kl <= EXACT["float32"] and ratio_dev <= EXACT["float32"], rows[0]
    bct_run, bct_rows = _train(model_path, tmp_path, "bct", 2)
    assert len(bct_rows) == 2 and all(torch.isfinite(torch.tensor(r["loss"])) for r in bct_rows)
    assert (bct_run.final_dir / "opct_checkpoint.json").exists()
    export_diff = _export_matches_base_plus_adapter(model_path, opct_run.run_dir, tmp_path / "export")
    assert export_diff <= 1e-4
    print(f"\nMATRIX | {family} | {loss_minus_kl:.1e} | {ratio_dev:.1e} | BCT loss {bct_rows[0]['loss']:.2f} -> {bct_rows[-1]['loss']:.2f} | "
          f"export {export_diff:.1e} |")


@pytest.mark.parametrize("family", ["mistral", "falcon"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_full_finetuning_and_bf16_are_on_policy(family, dtype, qwen3_tokenizer, tmp_path):
    """Full fine-tuning (every weight trained, the teacher a frozen copy) in float32 and in bfloat16 weights."""
    from opct.testing.families import make_config_model

    model_path = make_config_model(family, qwen3_tokenizer, tmp_path / "model")
    run, rows = _train(model_path, tmp_path, "opct", 2, finetune="full", **{"model.dtype": dtype})
    from safetensors import safe_open

    with safe_open(run.final_dir / "model.safetensors", "pt") as saved:  # trained and saved in that dtype
        assert {str(saved.get_slice(k).get_dtype()) for k in saved.keys()} == {"BF16" if dtype == "bfloat16" else "F32"}  # noqa: SIM118
    loss_minus_kl, ratio_dev = _step_one_deviation(rows)
    assert loss_minus_kl <= EXACT[dtype] and ratio_dev <= EXACT[dtype], rows[0]
    assert rows[1]["loss"] != rows[0]["loss"]  # the weights moved
    print(f"\nFULL | {family} | {dtype} | {loss_minus_kl:.1e} | {ratio_dev:.1e} |")
