"""The shared machinery of model judges: rubric rendering, a disk cache, parsing, abstention.

A concrete judge (:mod:`opct.judges.http`, :mod:`opct.judges.hf`) only supplies ``_complete``:
chat messages in, the judge model's text out, raising :class:`JudgeUnavailable` when the model could
not answer. Everything else (what is cached, what abstains) is decided here, once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from opct.judges.base import Verdict
from opct.judges.rubrics import Messages, Rubric, RubricParseError

MAX_REASON_CHARS = 2000


class JudgeUnavailable(RuntimeError):
    """The judge model gave no usable completion (after any retries)."""


class DiskCache:
    """One JSON file per key under ``root`` (``root/ab/abcdef....json``), written atomically."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry for ``key``, or ``None`` (a corrupt file counts as missing)."""
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        """Store ``entry`` under ``key`` (temporary file + rename, so readers never see half a file)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, ensure_ascii=False)
        os.replace(tmp, path)


def cache_key(identity: dict[str, Any], messages: Messages) -> str:
    """SHA-256 over the judge identity (name, version, rubric text, model, decoding) and the input."""
    blob = json.dumps({"identity": identity, "messages": messages}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class RubricJudge:
    """Base class: a :class:`~opct.judges.rubrics.Rubric` answered by some chat model.

    ``judge()`` renders the rubric, looks the exact input up in the cache (when ``cache_dir`` is set),
    otherwise calls ``_complete`` and caches the raw completion, then parses it. A failed call or an
    unparsable output gives an abstaining :class:`Verdict` (score 0, ``abstained=True``) whose reason
    says why; it never raises for those.
    """

    kind = "model"
    code_version = "1"

    def __init__(self, rubric: Rubric, model: str, *, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.rubric = rubric
        self.model = model
        self.cache = DiskCache(cache_dir) if cache_dir is not None else None
        self.name = f"{self.kind}:{rubric.name}:{model}"
        self.calls = 0  # completions actually requested from the model (cache hits excluded)

    @property
    def version(self) -> str:
        """Version recorded in every verdict: judge code version + rubric name and version."""
        return f"{self.kind}-{self.code_version}+rubric-{self.rubric.name}-{self.rubric.version}"

    def identity(self) -> dict[str, Any]:
        """Everything besides the input that determines the completion (used in the cache key)."""
        return {
            "judge": self.kind,
            "judge_version": self.version,
            "rubric": self.rubric.text,
            "model": self.model,
            "decoding": self.decoding(),
        }

    def decoding(self) -> dict[str, Any]:
        """Decoding settings that change the output (overridden by subclasses)."""
        return {}

    def _complete(self, messages: Messages) -> str:
        raise NotImplementedError

    def _abstain(self, reason: str) -> Verdict:
        return Verdict(0.0, "abstained", reason[:MAX_REASON_CHARS], self.name, self.version, abstained=True)

    def completion(self, messages: Messages) -> tuple[str, bool]:
        """The raw judge output for ``messages`` and whether it came from the cache."""
        key = cache_key(self.identity(), messages) if self.cache else ""
        if self.cache:
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("output"), str):
                return hit["output"], True
        self.calls += 1
        output = self._complete(messages)
        if self.cache:
            self.cache.put(key, {"output": output, "identity": self.identity(), "messages": messages,
                                 "created": time.time()})
        return output, False

    def judge(self, request: str, response: str, meta: dict[str, Any] | None = None) -> Verdict:
        """Grade ``response`` to ``request`` with the rubric (abstains instead of raising on failure)."""
        messages = self.rubric.render(request, response, meta)
        try:
            output, _ = self.completion(messages)
        except JudgeUnavailable as exc:
            return self._abstain(f"judge unavailable: {exc}")
        try:
            result = self.rubric.parse(output)
        except RubricParseError as exc:
            return self._abstain(f"unparsable judge output ({exc}): {output[-500:]!r}")
        fields = " ".join(f"{k}={v}" for k, v in result.fields.items())
        reason = f"{fields} | {output.strip()}"
        return Verdict(result.score, result.label, reason[:MAX_REASON_CHARS], self.name, self.version)
