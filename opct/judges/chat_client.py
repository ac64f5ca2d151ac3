"""The transport to any OpenAI-compatible chat-completions HTTP endpoint: request, retries, back-off, fail-fast.

Works with OpenAI, vLLM (``vllm serve``), llama.cpp server, Ollama, LiteLLM, Together... anything that
answers ``POST {base_url}/chat/completions``, over ``httpx``. The rubric judge (:mod:`opct.judges.http`) and
the model attacker ask through it.

Time limits: ``timeout`` bounds one attempt as a whole, from connecting to the last byte of the answer
(a watchdog shuts the connection's socket down at the deadline, so a server that sends its answer byte
by byte cannot hold it longer: httpx's own timeouts apply to each read alone), and one request,
retries and back-off included, gets at most ``timeout * (max_retries + 1)`` seconds (its *budget*).

Concurrency: at most ``concurrency`` requests of one client are in flight at once (a request waiting for
its turn has not started its time limit); :meth:`~opct.judges.http.HTTPJudge.judge_many` judges a list of samples on that
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

Credentials: a password in the URL (``http://alice:PW@host/v1``, sent by httpx as HTTP basic auth) is
shown and recorded only as ``http://alice:***@host/v1`` (:func:`opct.errors.redact_url`: in every message,
the cache key, an eval's ``state.json`` and ``results.json``); a URL with credentials together with an
API key is refused (:func:`opct.judges.endpoint.check_endpoint`), since only one of them could be used.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import httpx

from opct.errors import counted, redact_secrets, redact_url
from opct.judges.endpoint import check_endpoint
from opct.judges.http_transport import retry_after_seconds, send
from opct.judges.model_judge import JudgeOutage, JudgeUnavailable
from opct.judges.rubrics import Messages

ENV_BASE_URL = "OPCT_JUDGE_BASE_URL"
ENV_API_KEY = "OPCT_JUDGE_API_KEY"
ENV_CONCURRENCY = "OPCT_JUDGE_CONCURRENCY"
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Statuses that say the endpoint itself is unusable (down, wrong key, wrong URL or model): they count toward an
# outage, as do every retried status and every 5xx.
OUTAGE_STATUS = frozenset({401, 403, 404, 408})
DEFAULT_CONCURRENCY = 4


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
