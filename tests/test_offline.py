"""Offline means offline (issue 60, item 5): the tiny-model walkthrough's tokenizer ships with opct, and a
hub id that would have to be downloaded with no network stops at once with "no network: pass a local folder"
instead of after a minute of huggingface_hub's retries. The network is a loopback proxy that refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO
from typer.testing import CliRunner

SHARED_TOKENIZERS = REPO.parent / "shared" / "models"
#: A proxy on the loopback discard port: every connection through it is refused, nothing leaves the machine.
REFUSING_PROXY = "http://127.0.0.1:9"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every HTTP(S) request through a refusing proxy, an empty Hugging Face cache and opct cache."""
    from opct.config import hub

    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, REFUSING_PROXY)
    for name in ("NO_PROXY", "no_proxy", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("OPCT_CACHE", str(tmp_path / "opct-cache"))
    hub._unreachable.cache_clear()
    yield tmp_path
    hub._unreachable.cache_clear()


def test_a_hub_id_with_no_network_fails_at_once_with_what_to_do(no_network: Path) -> None:
    from opct.config.hub import HUB_TIMEOUT, NoNetworkError
    from opct.errors import USER_MISTAKE, describe
    from opct.models import load_tokenizer, model_context

    assert HUB_TIMEOUT < 10
    with pytest.raises(NoNetworkError, match=r"^no network: pass a local folder\. The model 'someone/tiny-model'") as err:
        load_tokenizer("someone/tiny-model")
    assert "Connection refused" in str(err.value) and "HF_HUB_OFFLINE=1" in str(err.value)
    assert describe(err.value)[0] == USER_MISTAKE
    assert model_context("someone/tiny-model") is None  # an OSError, as transformers' own: "unknown" there


def test_the_hub_is_asked_once_with_a_short_timeout(no_network: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The question is one HEAD request of at most HUB_TIMEOUT seconds, its answer kept for the process;
    HF_HUB_OFFLINE and an existing folder never ask."""
    import urllib.request

    from opct.config import hub

    asked = []

    def refuse(request, timeout):
        asked.append((request.get_method(), request.full_url, timeout))
        raise OSError("refused")

    monkeypatch.setattr(urllib.request.OpenerDirector, "open", lambda self, request, timeout=None: refuse(request, timeout))
    for _ in range(2):
        with pytest.raises(hub.NoNetworkError):
            hub.require_hub("someone/model")
    assert asked == [("HEAD", "https://huggingface.co", hub.HUB_TIMEOUT)]
    hub.require_hub(str(no_network))  # a folder here
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.require_hub("someone/model")
    assert len(asked) == 1


def test_opct_model_tiny_with_a_qwen3_hub_id_needs_no_network(no_network: Path) -> None:
    """The walkthrough's first command, as written, with no network: the Qwen3 tokenizer shipped with opct
    (unpacked and checked) is the real one, the same ids and chat template as ../shared's."""
    from transformers import AutoTokenizer

    from opct.cli.main import app

    out = no_network / "tiny-qwen3"
    res = CliRunner().invoke(app, ["model", "tiny", str(out), "--tokenizer", "Qwen/Qwen3-0.6B", "--instruct"])
    assert res.exit_code == 0, res.output
    assert "shipped with opct" in res.output
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen3"  # the family from the id
    tok = AutoTokenizer.from_pretrained(out)
    text = "Is 0.1 + 0.2 == 0.3? <think>no</think>"
    assert len(tok) == 151_669 and tok.eos_token == "<|im_end|>"
    if (SHARED_TOKENIZERS / "qwen3-tokenizer").is_dir():
        shared = AutoTokenizer.from_pretrained(SHARED_TOKENIZERS / "qwen3-tokenizer")
        assert tok(text)["input_ids"] == shared(text)["input_ids"]
        messages = [{"role": "user", "content": text}]
        assert tok.apply_chat_template(messages, tokenize=False) == shared.apply_chat_template(messages, tokenize=False)


def test_a_tokenizer_that_is_not_shipped_fails_with_no_network(no_network: Path) -> None:
    from opct.cli.main import app

    res = CliRunner().invoke(app, ["model", "tiny", str(no_network / "m"), "--tokenizer", "Qwen/Qwen2.5-0.5B",
                                   "--family", "qwen3"])
    assert res.exit_code == 2 and "no network: pass a local folder" in res.output, res.output
    assert not (no_network / "m").exists()


def test_a_silent_network_is_given_up_on_after_the_timeout(no_network: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy on loopback that accepts the connection and never answers (a blackholed network): the question
    ends at its timeout (shortened here) with the same message, instead of waiting on."""
    import socket

    from opct.config import hub

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        proxy = f"http://127.0.0.1:{silent.getsockname()[1]}"
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
            monkeypatch.setenv(name, proxy)
        monkeypatch.setattr(hub, "HUB_TIMEOUT", 0.5)
        with pytest.raises(hub.NoNetworkError, match=r"^no network: pass a local folder\..*did not answer within 0\.5 s"):
            hub.require_hub("someone/model")
