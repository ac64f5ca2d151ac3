"""A rubric judge served by any OpenAI-compatible chat-completions HTTP endpoint.

Works with OpenAI, vLLM (``vllm serve``), llama.cpp server, Ollama, LiteLLM, Together... anything that
answers ``POST {base_url}/chat/completions``. Standard library only (``urllib``).

Configuration: the model name is passed in (config); the base URL and key come from arguments or,
by default, from the environment variables ``OPCT_JUDGE_BASE_URL`` (e.g.
``http://localhost:8000/v1``) and ``OPCT_JUDGE_API_KEY`` (optional for local servers). The key is
never written to the cache or to verdicts.

Retries: HTTP 429, 5xx, connection errors and timeouts are retried with exponential back-off
(``backoff * 2**attempt`` seconds, capped at ``max_backoff``, or the server's ``Retry-After`` if that is
shorter than the cap). Other 4xx errors are not retried. When every attempt fails, or the reply has no
parseable verdict, the judge abstains (and nothing is cached).

Fail-fast: requests that fail because the endpoint is down or misconfigured (connection errors,
timeouts, HTTP 5xx, 401/403/404, a non-JSON body) are counted across samples; any answered request
resets the count. ``fail_after`` of them in a row raise :class:`~opct.judges.model_judge.JudgeOutage`,
which stops the evaluation instead of letting every remaining sample abstain. Timeout, retries and
``fail_after`` come from :class:`~opct.judges.model_judge.JudgeOptions`.

The cache key includes the endpoint (``base_url``), so verdicts of another server serving a model of
the same name are never reused; the API key is never part of it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

from opct.judges.model_judge import JudgeOptions, JudgeOutage, JudgeUnavailable, RubricJudge
from opct.judges.rubrics import Messages, Rubric

ENV_BASE_URL = "OPCT_JUDGE_BASE_URL"
ENV_API_KEY = "OPCT_JUDGE_API_KEY"
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Statuses that say the endpoint itself is unusable (down, wrong key, wrong URL or model): they count toward an outage.
OUTAGE_STATUS = frozenset({401, 403, 404, 408})


class ChatCompletionsClient:
    """The transport to an OpenAI-compatible ``/chat/completions`` endpoint: request, retries, back-off.

    ``env_base_url`` / ``env_api_key`` name the environment variables read when ``base_url`` /
    ``api_key`` are not passed (the judge and the model attacker use different ones). With
    ``fail_after``, that many failed requests in a row (see the module docstring) raise
    :class:`~opct.judges.model_judge.JudgeOutage`; ``None`` never gives up.
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
    ) -> None:
        base_url = base_url or os.environ.get(env_base_url)
        if not base_url:
            raise ValueError(f"no {what} endpoint: pass base_url or set {env_base_url} (e.g. http://localhost:8000/v1)")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get(env_api_key, "")
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
        self.consecutive_failures = 0  # failed requests in a row, across samples (reset by an answered one)
        self.sleep = time.sleep  # replaceable in tests

    def decoding(self) -> dict[str, Any]:
        """Decoding settings sent with every request."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, **self.extra_body}

    def _request(self, messages: Messages) -> urllib.request.Request:
        body = {"model": self.model, "messages": messages, **self.decoding()}
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode("utf-8"),
            headers=headers,
            method="POST",
        )

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = min(self.backoff * (2**attempt), self.max_backoff)
        if retry_after:
            with contextlib.suppress(ValueError):
                delay = min(max(float(retry_after), 0.0), self.max_backoff)
        return delay

    def _failed(self, error: str) -> None:
        """Count one failed request; raise :class:`JudgeOutage` at ``fail_after`` in a row."""
        self.consecutive_failures += 1
        if self.fail_after is not None and self.consecutive_failures >= self.fail_after:
            raise JudgeOutage(
                f"{self.what} endpoint {self.base_url} (model {self.model!r}) failed {self.consecutive_failures} "
                f"requests in a row; last error: {error}. Stopping rather than scoring every remaining sample as "
                f"abstained: check that the server is up and that {self.env_base_url} points at it, or raise "
                f"--judge-timeout (now {self.timeout:g} s) / --judge-fail-after (now {self.fail_after})."
            )

    def _complete(self, messages: Messages) -> str:
        errors: list[str] = []
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                with urllib.request.urlopen(self._request(messages), timeout=self.timeout) as resp:
                    payload = json.loads(resp.read().decode("utf-8"))
                self.consecutive_failures = 0
                return _content(payload)
            except urllib.error.HTTPError as exc:
                errors.append(f"HTTP {exc.code}")
                if exc.code >= 500 or exc.code in OUTAGE_STATUS:
                    self._failed(f"HTTP {exc.code}: {_body(exc)}")
                if exc.code not in RETRY_STATUS:
                    raise JudgeUnavailable(f"HTTP {exc.code} (not retried): {_body(exc)}") from exc
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                errors.append(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}")
                self._failed(errors[-1])
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                self._failed(f"non-JSON body: {exc}")
                raise JudgeUnavailable(f"endpoint returned non-JSON: {exc}") from exc
            if attempt < self.max_retries:
                self.sleep(self._delay(attempt, retry_after))
        raise JudgeUnavailable(f"gave up after {self.max_retries + 1} attempts: {', '.join(errors)}")


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
    ) -> None:
        opts = options or JudgeOptions()
        RubricJudge.__init__(self, rubric, model, cache_dir=cache_dir)
        ChatCompletionsClient.__init__(
            self, model, base_url=base_url, api_key=api_key, temperature=temperature, max_tokens=max_tokens,
            timeout=opts.timeout, max_retries=opts.max_retries, backoff=backoff, max_backoff=max_backoff,
            extra_body=extra_body, fail_after=opts.fail_after,
        )

    def decoding(self) -> dict[str, Any]:
        """Decoding settings that enter the cache key."""
        return ChatCompletionsClient.decoding(self)

    def identity(self) -> dict[str, Any]:
        """The rubric judge's identity plus the endpoint it asks (never the API key)."""
        return {**RubricJudge.identity(self), "endpoint": self.base_url}


def _body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read().decode("utf-8", "replace")[:300]
    except Exception:
        return ""


def _content(payload: Any) -> str:
    """The assistant text of a chat-completions response, or :class:`JudgeUnavailable`."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise JudgeUnavailable(f"malformed chat-completions response: {str(payload)[:300]}") from exc
    if not isinstance(content, str) or not content.strip():
        raise JudgeUnavailable("judge returned empty content")
    return content
