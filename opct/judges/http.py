"""A rubric judge served by any OpenAI-compatible chat-completions HTTP endpoint.

Works with OpenAI, vLLM (``vllm serve``), llama.cpp server, Ollama, LiteLLM, Together... anything that
answers ``POST {base_url}/chat/completions``, over ``httpx``.

Configuration: the model name is passed in (config); the base URL and key come from arguments or,
by default, from the environment variables ``OPCT_JUDGE_BASE_URL`` (e.g.
``http://localhost:8000/v1``), ``OPCT_JUDGE_API_KEY`` (optional for local servers) and
``OPCT_JUDGE_CONCURRENCY`` (requests in flight at once, default 4). The key is
never written to the cache or to verdicts.

The cache key includes the endpoint (``base_url``), so verdicts of another server serving a model of
the same name are never reused; the API key is never part of it.

The transport (time limits, concurrency, retries and back-off, fail-fast, credentials in the URL) is
:class:`~opct.judges.chat_client.ChatCompletionsClient`'s (:mod:`opct.judges.chat_client`);
:meth:`HTTPJudge.judge_many` judges a list of samples on ``concurrency`` threads (the evals judge each batch of
answers with it: :mod:`opct.evals.judging`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from opct.judges.chat_client import ChatCompletionsClient
from opct.judges.judge import Verdict
from opct.judges.model_judge import JudgeOptions, RubricJudge
from opct.judges.rubrics import Rubric


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
