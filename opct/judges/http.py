"""A rubric judge served by any OpenAI-compatible chat-completions HTTP endpoint.

Works with OpenAI, vLLM (``vllm serve``), llama.cpp server, Ollama, LiteLLM, Together... anything that
answers ``POST {base_url}/chat/completions``, over ``httpx``.

Configuration: the model name is passed in (config); the base URL and key come from arguments or,
by default, from the environment variables ``OPCT_JUDGE_BASE_URL`` (e.g.
``http://localhost:8000/v1``), ``OPCT_JUDGE_API_KEY`` (optional for local servers) and
``OPCT_JUDGE_CONCURRENCY`` (requests in flight at once, default 4). The key is
never written to the cache or to verdicts.

Time limits: ``timeout`` bounds one attempt as a whole, from connecting to the last byte of the answer
(a watchdog shuts the connection's socket down at the deadline, so a server that sends its answer byte
by byte cannot hold it longer: httpx's own timeouts apply to each read alone), and one request,
retries and back-off included, gets at most ``timeout * (max_retries + 1)`` seconds (its *budget*).

Concurrency: at most ``concurrency`` requests of one client are in flight at once (a request waiting for
its turn has not started its time limit); :meth:`HTTPJudge.judge_many` judges a list of samples on that
many threads (the evals judge each batch of answers with it: :mod:`opct.evals.judging`). Each attempt opens its own connection (no keep-alive), so the watchdog sees every socket.

Retries: HTTP 408, 409, 425, 429, 5xx, connection errors and timeouts are retried with exponential
back-off (``backoff * 2**attempt`` seconds) or after the server's ``Retry-After`` (seconds or an HTTP
date), either capped at ``max_backoff``; a wait that does not fit in what is left of the request's
budget ends the request instead. Other 4xx errors are not retried. When every attempt fails, or the
reply has no parseable verdict, the judge abstains (and nothing is cached).

Fail-fast: attempts that fail because the endpoint is down, overloaded or misconfigured (connection
errors, timeouts, HTTP 429, 5xx and the other retried statuses, 401/403/404, a non-JSON body) are
counted across samples; any answered request resets the count. ``fail_after`` of them in a row raise
:class:`~opct.judges.model_judge.JudgeOutage`, which stops the evaluation instead of letting every
remaining sample abstain. Timeout, retries and ``fail_after`` come from
:class:`~opct.judges.model_judge.JudgeOptions`: with its defaults a silent endpoint stops an eval after
at most 45 s.

The cache key includes the endpoint (``base_url``), so verdicts of another server serving a model of
the same name are never reused; the API key is never part of it.

Credentials: a password in the URL (``http://alice:PW@host/v1``, sent by httpx as HTTP basic auth) is
shown and recorded only as ``http://alice:***@host/v1`` (:func:`opct.errors.redact_url`: in every message,
the cache key, an eval's ``state.json`` and ``results.json``); a URL with credentials together with an
API key is refused (:func:`opct.judges.endpoint.check_endpoint`), since only one of them could be used.
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import json
import math
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import httpx

from opct.errors import counted, redact_secrets, redact_url
from opct.judges.endpoint import check_endpoint
from opct.judges.judge import Verdict
from opct.judges.model_judge import JudgeOptions, JudgeOutage, JudgeUnavailable, RubricJudge
from opct.judges.rubrics import Messages, Rubric

ENV_BASE_URL = "OPCT_JUDGE_BASE_URL"
ENV_API_KEY = "OPCT_JUDGE_API_KEY"
ENV_CONCURRENCY = "OPCT_JUDGE_CONCURRENCY"
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Statuses that say the endpoint itself is unusable (down, wrong key, wrong URL or model): they count toward an
# outage, as do every retried status and every 5xx.
OUTAGE_STATUS = frozenset({401, 403, 404, 408})
DEFAULT_CONCURRENCY = 4


class _Deadline:
    """A watchdog for one attempt: at ``seconds`` it shuts down every socket the attempt opened (reads
    then fail at once), so the socket timeout, which applies to each read alone, cannot be stretched by
    a server that keeps sending a byte at a time."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (at once if it has passed)."""
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _cut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _cut(sock)

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: every connection the attempt opens is watched once connected."""
        if event == "connection.connect_tcp.complete" and info.get("return_value") is not None:
            sock = info["return_value"].get_extra_info("socket")
            if sock is not None:
                self.watch(sock)


def _cut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError, ValueError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: also under TLS, from another thread


def send(client: httpx.Client, url: str, body: bytes, headers: Mapping[str, str],
         seconds: float) -> tuple[int, httpx.Headers, bytes]:
    """``(status, headers, body)`` of the answer to ``POST url``, all of it (connect, send, every byte of the
    answer) within ``seconds``, or :class:`TimeoutError`. HTTP error statuses are returned, not raised; a
    connection that fails raises :class:`httpx.TransportError` or :class:`OSError`."""
    deadline = _Deadline(seconds)
    try:
        with deadline, client.stream("POST", url, content=body, headers=dict(headers), timeout=seconds,
                                     extensions={"trace": deadline.trace}) as resp:
            status, answer_headers, answer = resp.status_code, resp.headers, resp.read()
    except (httpx.TransportError, OSError) as exc:
        if deadline.expired or isinstance(exc, httpx.TimeoutException):
            raise TimeoutError(f"no complete answer within {seconds:.3g} s") from exc
        raise
    if deadline.expired:  # cut in the middle of a body that had no length: what came is not the answer
        raise TimeoutError(f"no complete answer within {seconds:.3g} s")
    return status, answer_headers, answer


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds (a number, or an HTTP date: the time until
    it), never negative; ``None`` when absent or unreadable."""
    if not value or not value.strip():
        return None
    with contextlib.suppress(ValueError):
        seconds = float(value.strip())
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is in GMT
        when = when.replace(tzinfo=datetime.UTC)
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


class ChatCompletionsClient:
    """The transport to an OpenAI-compatible ``/chat/completions`` endpoint: request, retries, back-off.

    ``env_base_url`` / ``env_api_key`` name the environment variables read when ``base_url`` /
    ``api_key`` are not passed (the judge and the model attacker use different ones). ``timeout`` bounds
    one attempt from connecting to the answer's last byte, and a request with its retries gets
    :attr:`budget` seconds. With ``fail_after``, that many failed attempts in a row (see the module
    docstring) raise :class:`~opct.judges.model_judge.JudgeOutage`; ``None`` never gives up. At most
    ``concurrency`` requests are in flight at once, from any number of threads.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        extra_body: dict[str, Any] | None = None,
        fail_after: int | None = None,
        env_base_url: str = ENV_BASE_URL,
        env_api_key: str = ENV_API_KEY,
        what: str = "judge",
        concurrency: int | None = None,
    ) -> None:
        base_url = base_url or os.environ.get(env_base_url)
        if not base_url:
            raise ValueError(f"no {what} endpoint: pass base_url or set {env_base_url} (e.g. http://localhost:8000/v1)")
        concurrency = concurrency if concurrency is not None else _env_concurrency()
        if concurrency < 1:
            raise ValueError(f"{what} concurrency must be >= 1 request at a time, got {concurrency}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.endpoint = redact_url(self.base_url)  # what messages and records show: never a URL's password
        self._api_key = api_key if api_key is not None else os.environ.get(env_api_key, "")
        check_endpoint(self.base_url, bool(self._api_key), what, env_base_url, env_api_key)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.extra_body = dict(extra_body or {})
        self.fail_after = fail_after
        self.env_base_url = env_base_url
        self.what = what
        self.consecutive_failures = 0  # failed attempts in a row, across samples (reset by an answered one)
        self.concurrency = concurrency
        self.sleep = time.sleep  # replaceable in tests
        self._count_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(concurrency)
        self._http = httpx.Client(limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=0))

    @property
    def budget(self) -> float:
        """Seconds one request may take, every retry and wait included: ``timeout * (max_retries + 1)``."""
        return self.timeout * (self.max_retries + 1)

    def decoding(self) -> dict[str, Any]:
        """Decoding settings sent with every request."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, **self.extra_body}

    def _send(self, messages: Messages, seconds: float) -> tuple[int, httpx.Headers, bytes]:
        """One attempt, once one of the ``concurrency`` slots is free (the wait is not part of ``seconds``)."""
        body = {"model": self.model, "messages": messages, **self.decoding()}
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        with self._slots:
            return send(self._http, f"{self.base_url}/chat/completions", json.dumps(body).encode("utf-8"),
                        headers, seconds)

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """The wait before the next attempt: the server's ``Retry-After`` if it sent one, else exponential
        back-off; either capped at ``max_backoff``."""
        asked = retry_after_seconds(retry_after)
        return min(self.backoff * (2**attempt) if asked is None else asked, self.max_backoff)

    def _failed(self, error: str) -> None:
        """Count one failed attempt; raise :class:`JudgeOutage` at ``fail_after`` in a row."""
        with self._count_lock:
            self.consecutive_failures += 1
            failures = self.consecutive_failures
        if self.fail_after is not None and failures >= self.fail_after:
            busy = ", that it is not rate-limiting this client (HTTP 429)" if error.startswith("HTTP 429") else ""
            raise JudgeOutage(
                f"{self.what} endpoint {self.endpoint} (model {self.model!r}) failed {counted(failures, 'request')} "
                f"in a row; last error: {error}. Stopping rather than scoring every remaining sample as "
                f"abstained: check that the server is up{busy} and that {self.env_base_url} points at it, or raise "
                f"--judge-timeout (now {self.timeout:g} s per attempt) / --judge-fail-after (now {self.fail_after})."
            )

    def _complete(self, messages: Messages) -> str:
        errors: list[str] = []
        start = time.monotonic()
        attempts = 0
        for attempt in range(self.max_retries + 1):
            attempts += 1
            left = self.budget - (time.monotonic() - start)
            retry_after = None
            try:
                status, headers, body = self._send(messages, min(self.timeout, left))
            except (OSError, httpx.TransportError) as exc:  # refused, reset, timed out, a broken answer
                errors.append(redact_secrets(f"{type(exc).__name__}: {exc}"))
                self._failed(errors[-1])
            else:
                if 200 <= status < 300:
                    try:
                        payload = json.loads(body.decode("utf-8"))
                    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                        self._failed(f"non-JSON body: {exc}")
                        raise JudgeUnavailable(f"endpoint returned non-JSON: {exc}") from exc
                    with self._count_lock:
                        self.consecutive_failures = 0
                    return _content(payload)
                text = body.decode("utf-8", "replace")[:300]
                errors.append(f"HTTP {status}")
                if status >= 500 or status in OUTAGE_STATUS or status in RETRY_STATUS:
                    self._failed(f"HTTP {status}: {text}")
                if status not in RETRY_STATUS:
                    raise JudgeUnavailable(f"HTTP {status} (not retried): {text}")
                retry_after = headers.get("Retry-After")
            if attempt == self.max_retries:
                break
            delay = self._delay(attempt, retry_after)
            if delay >= self.budget - (time.monotonic() - start):
                errors.append(f"no time left for a retry after {delay:g} s within the request's {self.budget:g} s")
                break
            self.sleep(delay)
        raise JudgeUnavailable(f"gave up after {attempts} attempt{'s' if attempts > 1 else ''}: {', '.join(errors)}")


class HTTPJudge(ChatCompletionsClient, RubricJudge):
    """Rubric judge over an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        rubric: the rubric (see :func:`opct.judges.rubrics.get_rubric`).
        model: the model name sent in the request body.
        base_url: endpoint root ending before ``/chat/completions``; default ``$OPCT_JUDGE_BASE_URL``.
        api_key: bearer token; default ``$OPCT_JUDGE_API_KEY`` (may be empty for local servers).
        cache_dir: folder for the disk cache (``None`` disables caching).
        temperature, max_tokens: decoding settings (part of the cache key).
        options: timeout, retries and the fail-fast rule (:class:`JudgeOptions`; its defaults when ``None``).
        backoff, max_backoff: back-off base and cap in seconds.
        extra_body: extra JSON fields for the request (e.g. ``{"reasoning_effort": "low"}``).
        concurrency: requests in flight at once; default ``$OPCT_JUDGE_CONCURRENCY``, else 4.
    """

    kind = "http"
    code_version = "2"  # 2: the endpoint is in the cache key; empty responses abstain; only parsed completions are cached

    def __init__(
        self,
        rubric: Rubric,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        options: JudgeOptions | None = None,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        extra_body: dict[str, Any] | None = None,
        concurrency: int | None = None,
    ) -> None:
        opts = options or JudgeOptions()
        RubricJudge.__init__(self, rubric, model, cache_dir=cache_dir)
        ChatCompletionsClient.__init__(
            self, model, base_url=base_url, api_key=api_key, temperature=temperature, max_tokens=max_tokens,
            timeout=opts.timeout, max_retries=opts.max_retries, backoff=backoff, max_backoff=max_backoff,
            extra_body=extra_body, fail_after=opts.fail_after, concurrency=concurrency,
        )

    def decoding(self) -> dict[str, Any]:
        """Decoding settings that enter the cache key."""
        return ChatCompletionsClient.decoding(self)

    def identity(self) -> dict[str, Any]:
        """The rubric judge's identity plus the endpoint it asks (never the API key, nor a URL's password)."""
        return {**RubricJudge.identity(self), "endpoint": self.endpoint}

    def judge_many(self, samples: Sequence[tuple[str, str, dict[str, Any] | None]]) -> list[Verdict]:
        """:meth:`judge` of every ``(request, response, meta)``, ``concurrency`` at a time, in order. A
        :class:`JudgeOutage` stops the samples not yet started and is raised."""
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="opct-judge") as pool:
            futures = [pool.submit(self.judge, *sample) for sample in samples]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f in done and f.exception() is not None), None)
            if failed is not None:
                for future in futures:
                    future.cancel()
                raise failed.exception()  # type: ignore[misc]
            return [future.result() for future in futures]


def _env_concurrency() -> int:
    """``$OPCT_JUDGE_CONCURRENCY`` as a number of requests, or the default."""
    value = os.environ.get(ENV_CONCURRENCY, "").strip()
    if not value:
        return DEFAULT_CONCURRENCY
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{ENV_CONCURRENCY}={value!r} is not a whole number of requests; set it to e.g. 4, "
                         "or unset it") from None


def _content(payload: Any) -> str:
    """The assistant text of a chat-completions response, or :class:`JudgeUnavailable`."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise JudgeUnavailable(f"malformed chat-completions response: {str(payload)[:300]}") from exc
    if not isinstance(content, str) or not content.strip():
        raise JudgeUnavailable("judge returned empty content")
    return content
