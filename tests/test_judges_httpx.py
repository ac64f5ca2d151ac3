"""The HTTP judge over httpx: at most ``concurrency`` requests in flight, ``judge_many`` in order, an
outage stopping the rest, and a request waiting for its turn not losing its time limit to the wait."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from opct.judges import JudgeOptions, JudgeOutage
from opct.judges.http import HTTPJudge
from opct.judges.rubrics import get_rubric

GOOD = "The reply gives concrete steps.\nrefused: {refused}\nconvincing: 4\nspecific: 5"


class SlowEndpoint:
    """Answers after ``delay`` seconds, ``refused: 1`` for a response holding "ODD", and counts how
    many requests it serves at once (``most``); ``status`` other than 200 answers that instead."""

    def __init__(self, delay: float, status: int = 200) -> None:
        self.delay, self.status = delay, status
        self.now = self.most = self.requests = 0
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with endpoint.lock:
                    endpoint.requests += 1
                    endpoint.now += 1
                    endpoint.most = max(endpoint.most, endpoint.now)
                time.sleep(endpoint.delay)
                with endpoint.lock:
                    endpoint.now -= 1
                refused = int("ODD" in body["messages"][-1]["content"])
                reply = {"choices": [{"message": {"role": "assistant", "content": GOOD.format(refused=refused)}}]}
                data = json.dumps(reply if endpoint.status == 200 else {"error": "down"}).encode()
                self.send_response(endpoint.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()


@pytest.fixture
def slow() -> Iterator[SlowEndpoint]:
    ep = SlowEndpoint(delay=0.15)
    yield ep
    ep.server.shutdown()
    ep.server.server_close()


def _judge(url: str, tmp_path: Path, **kw: Any) -> HTTPJudge:
    options = kw.pop("options", JudgeOptions(timeout=5, max_retries=0, fail_after=3))
    return HTTPJudge(get_rubric("strongreject"), "m", base_url=url, cache_dir=tmp_path / "cache", options=options, **kw)


def test_judge_many_keeps_at_most_concurrency_requests_in_flight_and_its_order(slow, tmp_path):
    judge = _judge(slow.url, tmp_path, concurrency=3)
    samples = [("q", f"ODD answer {i}" if i % 2 else f"answer {i}", {}) for i in range(9)]
    verdicts = judge.judge_many(samples)
    assert slow.most == 3 and slow.requests == 9
    assert [v.label for v in verdicts] == [("not_harmful" if i % 2 else "harmful") for i in range(9)], [v.label for v in verdicts]


def test_a_request_waiting_for_its_turn_keeps_its_whole_timeout(slow, tmp_path):
    """One at a time, 0.15 s each, a 0.3 s timeout: the fourth waits 0.45 s for its turn and still succeeds."""
    judge = _judge(slow.url, tmp_path, concurrency=1, options=JudgeOptions(timeout=0.3, max_retries=0, fail_after=3))
    verdicts = judge.judge_many([("q", f"answer {i}", {}) for i in range(4)])
    assert slow.most == 1 and not any(v.abstained for v in verdicts)


def test_an_outage_in_judge_many_stops_the_samples_not_started(tmp_path):
    down = SlowEndpoint(delay=0.05, status=503)
    try:
        judge = _judge(down.url, tmp_path, concurrency=2, options=JudgeOptions(timeout=2, max_retries=0, fail_after=2))
        with pytest.raises(JudgeOutage, match="503"):
            judge.judge_many([("q", f"answer {i}", {}) for i in range(20)])
        assert down.requests < 20
    finally:
        down.server.shutdown()
        down.server.server_close()


def test_concurrency_comes_from_the_environment_and_is_checked(monkeypatch, tmp_path):
    monkeypatch.setenv("OPCT_JUDGE_CONCURRENCY", "7")
    assert _judge("http://127.0.0.1:9/v1", tmp_path).concurrency == 7
    monkeypatch.delenv("OPCT_JUDGE_CONCURRENCY")
    assert _judge("http://127.0.0.1:9/v1", tmp_path).concurrency == 4
    monkeypatch.setenv("OPCT_JUDGE_CONCURRENCY", "four")
    with pytest.raises(ValueError, match="OPCT_JUDGE_CONCURRENCY='four'"):
        _judge("http://127.0.0.1:9/v1", tmp_path)
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        _judge("http://127.0.0.1:9/v1", tmp_path, concurrency=0)


def test_a_refused_connection_is_counted_toward_the_outage(tmp_path):
    """httpx's ConnectError is a failed attempt like urllib's was: it counts toward fail_after."""
    judge = _judge("http://127.0.0.1:9/v1", tmp_path, options=JudgeOptions(timeout=1, max_retries=0, fail_after=1))
    with pytest.raises(JudgeOutage, match="ConnectError"):
        judge.judge("q", "r", {})
