"""benchmarks/engines.py: the engine throughput and log-prob agreement harness, run small on CPU.

The vLLM engine needs a GPU; here it is the fake of tests/test_vllm_engine.py, whose log-probs are made
up, so the harness must report them as disagreeing with the model's forward pass.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from script_loader import load_script
from transformers import AutoTokenizer

from tests.test_vllm_engine import fake_vllm  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT.parent / "shared" / "models" / "qwen3-tokenizer"
pytestmark = pytest.mark.skipif(not TOKENIZER.exists(), reason="../shared/models is absent")


def _engines():
    return load_script("benchmarks/engines.py")


def _run(tmp_path: Path, engines: str) -> dict:
    return _engines().main(["--size", "tiny", "--engines", engines, "--prompts", "3", "--n", "2", "--max-new-tokens", "6",
                            "--prompt-len", "20", "--threads", "1", "--work", str(tmp_path), "--out", str(tmp_path / "out")])


def test_hf_engines_record_the_policys_log_probs_and_the_result_is_written(tmp_path):
    result = _run(tmp_path, "opct-hf,hf-generate")
    for name in ("opct-hf", "hf-generate"):
        r = result["engines"][name]
        assert r["completion_tokens"] == 3 * 2 * 6  # EOS held back: every engine does the same work
        assert r["tokens_per_s"] > 0
        a = r["logprob_agreement"]
        assert a["tokens"] == 36 and a["max_abs_diff"] < 1e-4 and a["share_over_1e-3"] == 0.0
    (written,) = (tmp_path / "out").glob("engines-*.json")
    assert json.loads(written.read_text())["engines"].keys() == {"opct-hf", "hf-generate"}
    tok = AutoTokenizer.from_pretrained(TOKENIZER)
    prompts = _engines().make_prompts(tok, 2, 20, 0)
    assert all(len(p) >= 20 and p[0] == tok.convert_tokens_to_ids("<|im_start|>") for p in prompts)  # chat-rendered


def test_the_plain_and_fast_decoders_are_engines_of_their_own_timed_round_robin(tmp_path):
    result = _engines().main(["--size", "tiny", "--engines", "opct-plain,opct-fast,hf-generate", "--prompts", "2",
                              "--n", "2", "--max-new-tokens", "5", "--prompt-len", "20", "--threads", "1",
                              "--repeats", "2", "--work", str(tmp_path), "--out", str(tmp_path / "out")])
    engines = result["engines"]
    assert engines["opct-plain"]["decoder"] == "plain" and engines["opct-fast"]["decoder"] == "static"
    assert not engines["opct-fast"]["cuda_graphs"]  # a CPU
    for r in engines.values():
        assert len(r["all_seconds"]) == 2 and r["seconds"] == statistics.median(r["all_seconds"])
        assert r["speedup_vs_generate"] == r["tokens_per_s"] / engines["hf-generate"]["tokens_per_s"]
        assert r["logprob_agreement"]["max_abs_diff"] < 1e-4
    assert engines["opct-fast"]["completion_tokens"] == engines["opct-plain"]["completion_tokens"] == 2 * 2 * 5
    assert engines["opct-fast"]["against_plain"]["identical_completions"] == 1.0
    assert engines["opct-fast"]["against_plain"]["max_abs_logprob_diff"] <= 1e-4


def test_log_probs_that_are_not_the_models_are_reported(tmp_path, fake_vllm):  # noqa: F811
    a = _run(tmp_path, "vllm")["engines"]["vllm"]["logprob_agreement"]
    assert a["max_abs_diff"] > 1e-3 and a["share_over_1e-3"] > 0.5
