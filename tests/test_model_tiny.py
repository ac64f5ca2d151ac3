"""``opct model tiny``: the tiny random model of a real family that the real-model walkthrough runs on."""

from __future__ import annotations

import pytest
from conftest import REPO
from typer.testing import CliRunner

from opct.cli.main import app

TOKENIZER = REPO.parent / "shared" / "models" / "qwen3-tokenizer"


@pytest.mark.skipif(not TOKENIZER.exists(), reason="needs ../shared/models/qwen3-tokenizer (a real tokenizer, offline)")
def test_model_tiny_writes_a_loadable_model_of_the_family(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from opct.testing.tiny import tiny_config

    tokenizer_only = tmp_path / "tok"  # a tokenizer folder without tiny_config.json, as a hub tokenizer is
    AutoTokenizer.from_pretrained(TOKENIZER).save_pretrained(tokenizer_only)
    out = tmp_path / "tiny"
    res = CliRunner().invoke(app, ["model", "tiny", str(out), "--tokenizer", str(tokenizer_only), "--family", "qwen3",
                                   "--instruct"])
    assert res.exit_code == 0, res.output
    model = AutoModelForCausalLM.from_pretrained(out)
    assert type(model).__name__ == "Qwen3ForCausalLM" and model.config.num_hidden_layers == tiny_config("qwen3")["num_hidden_layers"]
    assert model.generation_config.temperature == 0.7  # an instruct checkpoint's sampling defaults
    assert AutoTokenizer.from_pretrained(out).chat_template  # the family's real chat template came along


def test_model_tiny_needs_a_family_when_the_tokenizer_has_no_tiny_config(tmp_path):
    res = CliRunner().invoke(app, ["model", "tiny", str(tmp_path / "m"), "--tokenizer", str(tmp_path)])
    assert res.exit_code == 2 and "--family" in res.output and "qwen3" in res.output
    res = CliRunner().invoke(app, ["model", "tiny", str(tmp_path / "m"), "--tokenizer", str(tmp_path), "--family", "llama9"])
    assert res.exit_code == 2 and "llama9" in res.output and not (tmp_path / "m").exists()
