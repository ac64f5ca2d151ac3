"""The shared machinery of model judges: rubric rendering, a disk cache, parsing, abstention.

A concrete judge (:mod:`opct.judges.http`, :mod:`opct.judges.hf`) only supplies ``_complete``:
chat messages in, the judge model's text out, raising :class:`JudgeUnavailable` when the model could
not answer (the sample abstains) or :class:`JudgeOutage` when the judge is down (the evaluation
stops). Everything else (what is cached, what abstains) is decided here, once.

The cache never lies: its key covers everything that determines the completion (the judge's
:meth:`RubricJudge.identity`: rubric name, version and text, model, decoding, and for a served judge
its endpoint) and the exact input, and only completions that parse into a verdict are stored, so an
error or an unparsable output is asked again on the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.errors import FAULT, OpctError
from opct.judges.judge import Verdict
from opct.judges.rubrics import Messages, Rubric, RubricParseError, RubricResult

MAX_REASON_CHARS = 2000
#: The environment variable naming the served judges' cache folder (default ``~/.cache/opct/judge``).
ENV_CACHE = "OPCT_JUDGE_CACHE"


class JudgeUnavailable(RuntimeError):
    """The judge model gave no usable completion for one input (after any retries): that sample abstains."""


class JudgeOutage(OpctError, RuntimeError):
    """The judge failed :attr:`JudgeOptions.fail_after` requests in a row: the whole evaluation stops,
    rather than going on with every remaining sample abstaining."""

    exit_code = FAULT


class JudgeCacheError(OpctError):
    """The judge's cache folder cannot be written (reported before any sample is judged)."""


@dataclass(frozen=True)
class JudgeOptions:
    """How a served judge is called: the time limit of an attempt, retries, and when to give up.

    Attributes:
        timeout: seconds one attempt may take, from connecting to the answer's last byte. A request
            with its retries and waits gets at most ``timeout * (max_retries + 1)`` seconds.
        max_retries: retries of a failed attempt (connection error, timeout, HTTP 429/5xx) after the
            first one, with back-off (or the server's ``Retry-After``); after them the sample abstains.
        fail_after: this many failed attempts in a row (connection errors, timeouts, HTTP 429, 5xx;
            counted across samples, reset by any answered request) raise :class:`JudgeOutage`.

    With the defaults (15 s, 2 retries, 3 failures) an endpoint that accepts connections and never
    answers stops the evaluation after at most 45 s (3 attempts of 15 s, the waits included).
    """

    timeout: float = 15.0
    max_retries: int = 2
    fail_after: int = 3

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"judge timeout must be > 0 seconds, got {self.timeout}")
        if self.max_retries < 0:
            raise ValueError(f"judge max_retries must be >= 0, got {self.max_retries}")
        if self.fail_after < 1:
            raise ValueError(f"judge fail_after must be >= 1, got {self.fail_after}")


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
        """Store ``entry`` under ``key`` (temporary file + rename, so readers never see half a file);
        :class:`JudgeCacheError` when the folder cannot be written."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh, ensure_ascii=False)
            os.replace(tmp, path)
        except OSError as err:
            raise self._unwritable(err) from err

    def check_writable(self) -> None:
        """Create the folder and write (then remove) a file in it, or raise :class:`JudgeCacheError`
        naming the folder and the system's reason: called when a judge is made, before any sample."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=self.root, suffix=".probe")
            os.close(fd)
            os.remove(probe)
        except OSError as err:
            raise self._unwritable(err) from err

    def _unwritable(self, err: OSError) -> JudgeCacheError:
        reason = err.strerror or str(err)
        where = f" ({err.filename})" if err.filename and str(err.filename) != str(self.root) else ""
        return JudgeCacheError(
            f"judge cache {self.root} cannot be written: {reason}{where}. Set {ENV_CACHE} to a writable "
            f"folder (e.g. {ENV_CACHE}=/tmp/opct-judge-cache) and rerun."
        )


def cache_key(identity: dict[str, Any], messages: Messages) -> str:
    """SHA-256 over the judge identity (judge and rubric name and version, rubric text, model, decoding,
    endpoint for a served judge) and the exact input messages."""
    blob = json.dumps({"identity": identity, "messages": messages}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class RubricJudge:
    """Base class: a :class:`~opct.judges.rubrics.Rubric` answered by some chat model.

    ``judge()`` renders the rubric, looks the exact input up in the cache (when ``cache_dir`` is set,
    which must be writable: :class:`JudgeCacheError` otherwise, when the judge is made),
    otherwise calls ``_complete``, parses the completion and caches it only when it parsed. A failed
    call or an unparsable output gives an abstaining :class:`Verdict` (score 0, ``abstained=True``)
    whose reason says why, and nothing is cached; it never raises for those (only
    :class:`JudgeOutage`, when the judge is down, propagates).
    """

    kind = "model"
    code_version = "1"

    def __init__(self, rubric: Rubric, model: str, *, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.rubric = rubric
        self.model = model
        self.cache = DiskCache(cache_dir) if cache_dir is not None else None
        if self.cache is not None:
            self.cache.check_writable()  # an unwritable cache is an error now, not in every record later
        self.name = f"{self.kind}:{rubric.name}:{model}"
        self.calls = 0  # completions actually requested from the model (cache hits excluded)

    @property
    def version(self) -> str:
        """Version recorded in every verdict: judge code version + rubric name and version."""
        return f"{self.kind}-{self.code_version}+rubric-{self.rubric.name}-{self.rubric.version}"

    def identity(self) -> dict[str, Any]:
        """Everything besides the input that determines the completion (used in the cache key); a served
        judge adds its endpoint."""
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

    def _cached(self, key: str) -> tuple[str, RubricResult] | None:
        """The cached completion for ``key`` and its parse, or ``None`` (an entry that no longer parses,
        e.g. stored by an older version, is ignored and asked again)."""
        hit = self.cache.get(key) if self.cache else None
        if hit is None or not isinstance(hit.get("output"), str):
            return None
        try:
            return hit["output"], self.rubric.parse(hit["output"])
        except RubricParseError:
            return None

    def judge(self, request: str, response: str, meta: dict[str, Any] | None = None) -> Verdict:
        """Grade ``response`` to ``request`` with the rubric (abstains instead of raising on failure, and on
        an empty response, label ``empty``; raises :class:`JudgeOutage` when the judge is down)."""
        if not response.strip():
            return Verdict(0.0, "empty", "empty response (not sent to the judge model)", self.name, self.version,
                           abstained=True)
        messages = self.rubric.render(request, response, meta)
        key = cache_key(self.identity(), messages) if self.cache else ""
        cached = self._cached(key)
        if cached is not None:
            output, result = cached
        else:
            self.calls += 1
            try:
                output = self._complete(messages)
            except JudgeUnavailable as exc:
                return self._abstain(f"judge unavailable: {exc}")
            try:
                result = self.rubric.parse(output)
            except RubricParseError as exc:
                return self._abstain(f"unparsable judge output ({exc}): {output[-500:]!r}")
            if self.cache:
                self.cache.put(key, {"output": output, "identity": self.identity(), "messages": messages,
                                     "created": time.time()})
        fields = " ".join(f"{k}={v}" for k, v in result.fields.items())
        reason = f"{fields} | {output.strip()}"
        return Verdict(result.score, result.label, reason[:MAX_REASON_CHARS], self.name, self.version)
