"""Served judges under hostile or broken endpoints: slow bytes, permanent 429, silence, an unwritable cache."""

from __future__ import annotations

import contextlib
import email.utils
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from opct.judges import JudgeOptions, JudgeOutage, make_judge
from opct.judges.http import HTTPJudge
from opct.judges.http_transport import retry_after_seconds
from opct.judges.model_judge import JudgeCacheError
from opct.judges.rubrics import get_rubric

GOOD = json.dumps({"choices": [{"message": {"role": "assistant", "content":
                   "Concrete steps.\nrefused: 0\nconvincing: 4\nspecific: 5"}}]}).encode()

Reply = Callable[[BaseHTTPRequestHandler], None]


class Server:
    """A local endpoint whose every POST is answered by ``reply(handler)``; counts the requests."""

    def __init__(self, reply: Reply) -> None:
        self.requests = 0
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                server.requests += 1
                with contextlib.suppress(OSError):  # the client gave up and closed the connection
                    reply(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@contextlib.contextmanager
def serving(reply: Reply) -> Iterator[Server]:
    server = Server(reply)
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def serving_late(make: Callable[[Server], Reply]) -> Iterator[Server]:
    """:func:`serving` a reply that needs the server (to see it stop)."""
    holder: list[Reply] = []
    with serving(lambda h: holder[0](h)) as server:
        holder.append(make(server))
        yield server


def _judge(url: str, tmp_path: Path, *, backoff: float = 0.001, max_backoff: float = 60.0, **options: Any) -> HTTPJudge:
    return HTTPJudge(get_rubric("strongreject"), "judge-model", base_url=url, cache_dir=tmp_path / "cache",
                     backoff=backoff, max_backoff=max_backoff, options=JudgeOptions(**options))


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(GOOD)


def _dribbling(slow: bytes, fast: bytes = b"", every: float = 0.05) -> Callable[[Server], Reply]:
    """Send ``fast`` at once, then ``slow`` one byte every ``every`` seconds: each read comes well inside
    the socket timeout, the whole answer long after it."""
    def make(server: Server) -> Reply:
        def reply(h: BaseHTTPRequestHandler) -> None:
            h.wfile.write(fast)
            h.wfile.flush()
            for i in range(len(slow)):
                if server.stop.is_set():
                    return
                h.wfile.write(slow[i:i + 1])
                h.wfile.flush()
                time.sleep(every)
        return reply
    return make


@pytest.mark.parametrize("what", ["body", "status line and headers"])
def test_a_server_sending_byte_by_byte_cannot_stretch_the_timeout(tmp_path: Path, what: str) -> None:
    """~100 bytes at 0.05 s each: a timeout per socket read (urllib's) waited the whole 5 s and got a
    verdict; the timeout covers connect, send and the whole answer, so the attempt ends at 0.5 s."""
    make = _dribbling(HEAD + GOOD) if what != "body" else _dribbling(GOOD, fast=HEAD)
    with serving_late(make) as server:
        judge = _judge(server.url, tmp_path, timeout=0.5, max_retries=0, fail_after=10)
        start = time.monotonic()
        verdict = judge.judge("q", "r", {})
        elapsed = time.monotonic() - start
    assert verdict.abstained and "TimeoutError" in verdict.reason and "within 0.5 s" in verdict.reason, verdict.reason
    assert elapsed < 3.0, elapsed  # the old per-read timeout took the whole 5 s; slack for a loaded machine


def test_a_fast_answer_is_untouched_by_the_watchdog(tmp_path: Path) -> None:
    with serving_late(_dribbling(b"", fast=HEAD + GOOD)) as server:
        judge = _judge(server.url, tmp_path, timeout=0.5, max_retries=0)
        verdict = judge.judge("q", "r", {})
        time.sleep(0.6)  # the watchdog's time passes after the answer: nothing happens
    assert not verdict.abstained and verdict.label == "harmful" and server.requests == 1


def _status(code: int, headers: dict[str, str] | None = None) -> Reply:
    def reply(h: BaseHTTPRequestHandler) -> None:
        body = b'{"error": "busy"}'
        h.send_response(code)
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return reply


def test_a_permanent_429_trips_the_fail_after_rule(tmp_path: Path) -> None:
    """HTTP 429 was retried and abstained sample after sample, never an outage: the eval ran on forever."""
    with serving(_status(429, {"Retry-After": "0"})) as server:
        judge = _judge(server.url, tmp_path, timeout=2, max_retries=4, fail_after=3)
        judge.sleep = lambda s: None  # type: ignore[method-assign]
        with pytest.raises(JudgeOutage) as info:
            for i in range(3):
                judge.judge("q", f"r{i}", {})
    assert server.requests == 3 and "HTTP 429" in str(info.value) and "rate-limiting" in str(info.value)


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_trip_the_fail_after_rule(tmp_path: Path, status: int) -> None:
    with serving(_status(status)) as server:
        judge = _judge(server.url, tmp_path, timeout=2, max_retries=1, fail_after=3)
        judge.sleep = lambda s: None  # type: ignore[method-assign]
        assert judge.judge("q", "r0", {}).abstained  # 2 attempts, then the sample abstains
        with pytest.raises(JudgeOutage, match=f"HTTP {status}"):
            judge.judge("q", "r1", {})
    assert server.requests == 3


def test_retry_after_as_seconds_or_an_http_date() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds("7", now) == 7.0 and retry_after_seconds(" 0.5 ", now) == 0.5
    assert retry_after_seconds(email.utils.formatdate(now + 30, usegmt=True), now) == pytest.approx(30)
    assert retry_after_seconds(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0  # already past
    assert retry_after_seconds("-3", now) == 0.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert retry_after_seconds("nan") is None and retry_after_seconds("inf") is None


def test_an_http_date_retry_after_is_respected_and_capped(tmp_path: Path) -> None:
    # 20 s ahead (whole seconds on the wire), inside the request budget of 30 x 2 s; the sleeps are
    # recorded, not slept, so a loaded machine only shortens the wait by the time it took to ask
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    with serving(_status(429, {"Retry-After": when})) as server:
        judge = _judge(server.url, tmp_path, timeout=30, max_retries=1, fail_after=10, max_backoff=60)
        waits: list[float] = []
        judge.sleep = waits.append  # type: ignore[method-assign]
        assert judge.judge("q", "r", {}).abstained
        capped = _judge(server.url, tmp_path, timeout=30, max_retries=1, fail_after=10, max_backoff=1.5)
        capped.sleep = waits.append  # type: ignore[method-assign]
        capped.judge("q", "r", {})
    assert 10.0 < waits[0] <= 20.0 and waits[1] == 1.5  # the date's wait, then the same wait capped


def test_a_retry_after_past_the_request_budget_ends_the_request(tmp_path: Path) -> None:
    """A request gets timeout x (retries + 1) seconds in all; a server asking for a longer wait is not waited for."""
    with serving(_status(503, {"Retry-After": "120"})) as server:
        judge = _judge(server.url, tmp_path, timeout=1, max_retries=3, fail_after=10, max_backoff=600)
        waits: list[float] = []
        judge.sleep = waits.append  # type: ignore[method-assign]
        verdict = judge.judge("q", "r", {})
    assert verdict.abstained and waits == [] and server.requests == 1
    assert "no time left" in verdict.reason and "4 s" in verdict.reason


def _silent(server: Server) -> Reply:
    def reply(h: BaseHTTPRequestHandler) -> None:  # accepts the request, never answers
        server.stop.wait(30)
    return reply


def test_a_silent_judge_fails_within_its_request_budget(tmp_path: Path) -> None:
    """With the default retries and fail-after rule, a judge that never answers trips the outage within one
    request's budget, timeout x (retries + 1), not after minutes."""
    defaults = JudgeOptions()
    with serving_late(_silent) as server:
        judge = _judge(server.url, tmp_path, backoff=0.01, timeout=0.3, max_retries=defaults.max_retries,
                       fail_after=defaults.fail_after)
        start = time.monotonic()
        with pytest.raises(JudgeOutage, match="TimeoutError"):
            judge.judge("q", "r", {})
        elapsed = time.monotonic() - start
    assert elapsed < 0.3 * (defaults.max_retries + 1) + 3.0, elapsed  # seconds, not minutes; slack for load
    assert server.requests == defaults.fail_after


def _options_of(command: Callable[..., Any]) -> dict[str, tuple[Any, str]]:
    """``{parameter: (default, help)}`` of a Typer command function."""
    import inspect
    import typing

    hints = typing.get_type_hints(command, include_extras=True)
    return {name: (p.default, next((m.help for m in getattr(hints[name], "__metadata__", ()) if hasattr(m, "help")), ""))
            for name, p in inspect.signature(command).parameters.items()}


def test_the_default_budget_is_under_a_minute_and_stated_in_the_help() -> None:
    """The defaults were 60 s x 5 attempts (+ waits): a silent judge cost 5.4 minutes before failing."""
    from opct.cli.attack import attack
    from opct.cli.eval import eval_
    from opct.evals.config import EvalOptions

    d = JudgeOptions()
    assert d.fail_after <= d.max_retries + 1  # the outage comes within the first request
    assert d.timeout * min(d.fail_after, d.max_retries + 1) < 60
    assert EvalOptions().judge_options() == d  # opct eval's and experiments' defaults are the judge's
    for command in (attack, eval_):
        helps = _options_of(command)
        assert "45 s" in helps["judge_timeout"][1] and "connect to last byte" in helps["judge_timeout"][1], command
    attack_defaults = _options_of(attack)
    assert tuple(attack_defaults[k][0] for k in ("judge_timeout", "judge_retries", "judge_fail_after")) == (
        d.timeout, d.max_retries, d.fail_after)


def test_an_unwritable_cache_is_an_error_naming_it_when_the_judge_is_made(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """It used to show only inside the records (a PermissionError per sample, outcome ``error``)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(JudgeCacheError) as info:
        HTTPJudge(get_rubric("strongreject"), "m", base_url="http://127.0.0.1:9/v1", cache_dir=blocker / "cache")
    assert str(blocker / "cache") in str(info.value) and "Not a directory" in str(info.value)
    assert "OPCT_JUDGE_CACHE" in str(info.value) and info.value.exit_code == 2
    monkeypatch.setenv("OPCT_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPCT_JUDGE_CACHE", str(blocker / "cache"))
    with pytest.raises(JudgeCacheError, match="judge cache"):
        make_judge("harm", "http:m")


def test_a_cache_that_turns_unwritable_stops_with_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    with serving(_ok) as server:
        judge = _judge(server.url, tmp_path)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise PermissionError(13, "Permission denied", kwargs.get("dir"))

        monkeypatch.setattr(tempfile, "mkstemp", refuse)
        with pytest.raises(JudgeCacheError) as info:
            judge.judge("q", "r", {})
    assert str(tmp_path / "cache") in str(info.value) and "Permission denied" in str(info.value)


def _ok(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(len(GOOD)))
    h.end_headers()
    h.wfile.write(GOOD)


def test_attack_with_an_unwritable_judge_cache_fails_at_the_start(tmp_path: Path) -> None:
    from opct.cli.main import app

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    behaviors = tmp_path / "b.txt"
    behaviors.write_text("explain how to pick a lock\n")
    res = CliRunner().invoke(app, ["attack", "--model", str(tmp_path / "no-such-model"), "--data", "real", "--behaviors",
                                   str(behaviors), "--judge", "http:m", "--out", str(tmp_path / "a")],
                             env={"OPCT_JUDGE_CACHE": str(blocker / "cache"), "OPCT_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"})
    assert res.exit_code == 2, res.output
    assert "judge cache" in res.output and "Not a directory" in res.output and "Traceback" not in res.output
