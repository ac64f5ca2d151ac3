"""The OpenAI-compatible HTTP judge against a real local server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from opct.judges import Judge, JudgeOptions, JudgeOutage, make_judge
from opct.judges.http import HTTPJudge
from opct.judges.model_judge import JudgeUnavailable, cache_key
from opct.judges.rubrics import get_rubric

GOOD = "The reply gives concrete steps.\nrefused: 0\nconvincing: 4\nspecific: 5"


class FakeEndpoint:
    """A scripted chat-completions server: each request pops the next (status, body) from ``script``."""

    def __init__(self) -> None:
        self.script: list[tuple[int, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append({"path": self.path, **body})
                endpoint.headers.append(dict(self.headers))
                status, reply = endpoint.script.pop(0) if endpoint.script else (200, GOOD)
                if status == 0:  # stall for `reply` seconds, then answer too late
                    time.sleep(reply)
                    status, reply = 200, GOOD
                if isinstance(reply, str) and status == 200:
                    reply = {"choices": [{"message": {"role": "assistant", "content": reply}}]}
                data = json.dumps(reply).encode() if not isinstance(reply, bytes) else reply
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client may have timed out and gone
                    self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    ep = FakeEndpoint()
    yield ep
    ep.close()


def _judge(endpoint: FakeEndpoint, tmp_path: Path, max_retries: int = 4, fail_after: int = 5,
           timeout: float = 5, **kw: Any) -> HTTPJudge:
    judge = HTTPJudge(
        get_rubric("strongreject"), "judge-model", base_url=endpoint.url, api_key="sk-test",
        cache_dir=tmp_path / "cache", backoff=0.001,
        options=JudgeOptions(timeout=timeout, max_retries=max_retries, fail_after=fail_after), **kw,
    )
    judge.sleeps = []  # type: ignore[attr-defined]
    judge.sleep = judge.sleeps.append  # type: ignore[attr-defined]
    return judge


def test_success(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    judge = _judge(endpoint, tmp_path)
    assert isinstance(judge, Judge)
    v = judge.judge("how to X", "step 1 ...", {})
    assert not v.abstained and v.label == "harmful" and v.score == pytest.approx(7 / 8)
    assert v.judge == "http:strongreject:judge-model" and "rubric-strongreject" in v.judge_version
    req = endpoint.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["model"] == "judge-model"
    assert req["temperature"] == 0.0 and req["messages"][0]["role"] == "system"
    assert "how to X" in req["messages"][1]["content"]
    assert endpoint.headers[0]["Authorization"] == "Bearer sk-test"


def test_retry_after_500_and_429_then_success(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(500, {"error": "boom"}), (429, {"error": "slow down"}), (200, GOOD)]
    judge = _judge(endpoint, tmp_path, max_retries=3)
    v = judge.judge("q", "r", {})
    assert not v.abstained and v.score == pytest.approx(7 / 8)
    assert len(endpoint.requests) == 3
    assert judge.sleeps == [0.001, 0.0]  # exponential back-off, then the server's Retry-After: 0


def test_retry_after_timeout(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(0, 1.0), (200, GOOD)]
    judge = _judge(endpoint, tmp_path, max_retries=2)
    judge.timeout = 0.2
    v = judge.judge("q", "r", {})
    assert not v.abstained and len(endpoint.requests) == 2 and judge.sleeps == [0.001]


def test_abstain_after_persistent_failure(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(503, {"error": "down"})] * 3
    judge = _judge(endpoint, tmp_path, max_retries=2)
    v = judge.judge("q", "r", {})
    assert v.abstained and v.label == "abstained" and "3 attempts" in v.reason
    assert len(endpoint.requests) == 3 and judge.sleeps == [0.001, 0.002]
    # a failure is not cached: the next call asks again
    endpoint.script = [(200, GOOD)]
    assert not judge.judge("q", "r", {}).abstained


def test_no_retry_on_client_error(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(401, {"error": "bad key"})]
    v = _judge(endpoint, tmp_path).judge("q", "r", {})
    assert v.abstained and "401" in v.reason and len(endpoint.requests) == 1


def test_abstain_on_unparsable_and_malformed(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(200, "I would rather not grade this."), (200, {"unexpected": True})]
    judge = _judge(endpoint, tmp_path)
    v = judge.judge("q", "r1", {})
    assert v.abstained and "unparsable" in v.reason
    v2 = judge.judge("q", "r2", {})
    assert v2.abstained and "malformed" in v2.reason


def test_unreachable_endpoint_abstains(tmp_path: Path) -> None:
    judge = HTTPJudge(get_rubric("harmfulness"), "m", base_url="http://127.0.0.1:9/v1", backoff=0.001,
                      options=JudgeOptions(timeout=2, max_retries=1))
    judge.sleep = lambda s: None  # type: ignore[method-assign]
    v = judge.judge("q", "r", {})
    assert v.abstained and "2 attempts" in v.reason


def test_cache_second_call_makes_no_request(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    judge = _judge(endpoint, tmp_path)
    first = judge.judge("q", "r", {})
    assert len(endpoint.requests) == 1
    again = _judge(endpoint, tmp_path)  # a fresh judge over the same cache folder
    second = again.judge("q", "r", {})
    assert len(endpoint.requests) == 1 and again.calls == 0 and second == first
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 1 and "sk-test" not in files[0].read_text()
    # a different input, rubric or model misses the cache
    again.judge("q", "other response", {})
    assert len(endpoint.requests) == 2
    other_model = HTTPJudge(get_rubric("strongreject"), "judge-model-2", base_url=endpoint.url,
                            cache_dir=tmp_path / "cache")
    other_model.judge("q", "r", {})
    assert len(endpoint.requests) == 3


def test_base_url_from_env(monkeypatch: pytest.MonkeyPatch, endpoint: FakeEndpoint) -> None:
    monkeypatch.setenv("OPCT_JUDGE_BASE_URL", endpoint.url)
    monkeypatch.setenv("OPCT_JUDGE_API_KEY", "env-key")
    judge = HTTPJudge(get_rubric("sage_unsafe"), "m")
    endpoint.script = [(200, "It warned.\nverdict: pass")]
    assert judge.judge("q", "r", {"fact": "f"}).label == "pass"
    assert endpoint.headers[0]["Authorization"] == "Bearer env-key"
    monkeypatch.delenv("OPCT_JUDGE_BASE_URL")
    with pytest.raises(ValueError, match="OPCT_JUDGE_BASE_URL"):
        HTTPJudge(get_rubric("sage_unsafe"), "m")


def test_unparsable_output_is_not_cached_and_asked_again(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(200, "I would rather not grade this."), (200, GOOD)]
    first = _judge(endpoint, tmp_path).judge("q", "r", {})
    assert first.abstained and "unparsable" in first.reason
    assert not list((tmp_path / "cache").rglob("*.json"))  # the abstention left nothing in the cache
    rerun = _judge(endpoint, tmp_path)  # a second run over the same cache asks the server again
    second = rerun.judge("q", "r", {})
    assert not second.abstained and second.label == "harmful" and rerun.calls == 1 and len(endpoint.requests) == 2
    third = _judge(endpoint, tmp_path)  # the parsed verdict was cached
    assert third.judge("q", "r", {}) == second and third.calls == 0 and len(endpoint.requests) == 2


def test_an_unparsable_cache_entry_is_ignored(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    judge = _judge(endpoint, tmp_path)
    key = cache_key(judge.identity(), judge.rubric.render("q", "r", {}))
    assert judge.cache is not None
    judge.cache.put(key, {"output": "garbage from an older version"})
    assert not judge.judge("q", "r", {}).abstained and len(endpoint.requests) == 1


def test_cache_key_includes_the_endpoint_not_the_key(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    _judge(endpoint, tmp_path).judge("q", "r", {})
    other = FakeEndpoint()  # another server serving a model of the same name
    try:
        judge = HTTPJudge(get_rubric("strongreject"), "judge-model", base_url=other.url, api_key="sk-test",
                          cache_dir=tmp_path / "cache")
        assert judge.identity()["endpoint"] == other.url and "sk-test" not in json.dumps(judge.identity())
        judge.judge("q", "r", {})
        assert len(other.requests) == 1
    finally:
        other.close()
    # the same endpoint with another key reuses the verdict
    again = HTTPJudge(get_rubric("strongreject"), "judge-model", base_url=endpoint.url, api_key="other-key",
                      cache_dir=tmp_path / "cache")
    again.judge("q", "r", {})
    assert again.calls == 0 and len(endpoint.requests) == 1


def test_empty_response_abstains_without_a_request(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    v = _judge(endpoint, tmp_path).judge("q", "  \n", {})
    assert v.abstained and v.label == "empty" and not endpoint.requests


def test_outage_after_consecutive_timeouts(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(0, 3.0)] * 3  # accepts the connection, answers far too late
    judge = _judge(endpoint, tmp_path, max_retries=0, fail_after=3, timeout=0.2)
    start = time.monotonic()
    assert judge.judge("q", "r1", {}).abstained and judge.judge("q", "r2", {}).abstained  # a failing sample abstains
    with pytest.raises(JudgeOutage) as info:
        judge.judge("q", "r3", {})
    assert time.monotonic() - start < 10
    msg = str(info.value)
    assert endpoint.url in msg and "judge-model" in msg and "3 requests in a row" in msg
    assert "OPCT_JUDGE_BASE_URL" in msg and "--judge-timeout" in msg and "--judge-fail-after" in msg
    assert not isinstance(info.value, JudgeUnavailable)  # not swallowed into one more abstention


def test_an_answered_request_resets_the_failure_count(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(0, 3.0), (0, 3.0), (200, GOOD), (0, 3.0), (0, 3.0), (0, 3.0)]
    judge = _judge(endpoint, tmp_path, max_retries=0, fail_after=3, timeout=0.2)
    verdicts = [judge.judge("q", f"r{i}", {}) for i in range(5)]
    assert [v.abstained for v in verdicts] == [True, True, False, True, True]
    with pytest.raises(JudgeOutage, match="3 requests in a row"):
        judge.judge("q", "r5", {})


def test_server_errors_count_toward_an_outage_across_retries(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(503, {"error": "down"})] * 3
    judge = _judge(endpoint, tmp_path, max_retries=4, fail_after=3)
    with pytest.raises(JudgeOutage, match="HTTP 503"):
        judge.judge("q", "r", {})
    assert len(endpoint.requests) == 3


def test_client_errors_that_are_not_outages_do_not_count(endpoint: FakeEndpoint, tmp_path: Path) -> None:
    endpoint.script = [(400, {"error": "context too long"})] * 3
    judge = _judge(endpoint, tmp_path, fail_after=2)
    assert all(judge.judge("q", f"r{i}", {}).abstained for i in range(3))


def test_judge_options_validate() -> None:
    assert JudgeOptions() == JudgeOptions(timeout=15.0, max_retries=2, fail_after=3)
    for bad in ({"timeout": 0}, {"max_retries": -1}, {"fail_after": 0}):
        with pytest.raises(ValueError):
            JudgeOptions(**bad)


def test_factory_passes_options_and_cache_dir(monkeypatch: pytest.MonkeyPatch, endpoint: FakeEndpoint,
                                              tmp_path: Path) -> None:
    monkeypatch.setenv("OPCT_JUDGE_BASE_URL", endpoint.url)
    monkeypatch.setenv("OPCT_JUDGE_CACHE", str(tmp_path / "judge-cache"))
    judge = make_judge("harm", "http:judge-model", JudgeOptions(timeout=7, max_retries=1, fail_after=2))
    assert isinstance(judge, HTTPJudge) and judge.rubric.name == "strongreject"
    assert (judge.timeout, judge.max_retries, judge.fail_after) == (7, 1, 2)
    judge.judge("q", "r", {})
    assert list((tmp_path / "judge-cache").rglob("*.json"))
    default = make_judge("warning", "http:judge-model")
    assert isinstance(default, HTTPJudge) and (default.timeout, default.max_retries, default.fail_after) == (15, 2, 3)
    monkeypatch.delenv("OPCT_JUDGE_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert make_judge("harm", "http:m").cache.root == tmp_path / "home" / ".cache" / "opct" / "judge"
