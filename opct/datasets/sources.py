"""Where benchmark data comes from when it is not a local file: a Hugging Face hub id, and the network.

A data setting (``eval.real.math500``, ``opct pairs build awareness SOURCE``, a loader's ``path``) is
one of

* a local file: ``.jsonl``, ``.parquet``, ``.csv`` or ``.json``;
* a local ``datasets.save_to_disk`` folder;
* a hub id, ``[hf:]owner/name[:config][@revision][#split]``, e.g.
  ``HuggingFaceH4/MATH-500@<commit>`` or ``hf:Idavidrein/gpqa:gpqa_diamond@<commit>#train``.

A path that exists is always read as a local path; a string that does not exist and has the shape
``owner/name`` (and no file suffix) is a hub id; the ``hf:`` prefix makes it one in every case.
Without a revision the hub's ``main`` is used, which can change under you: pin one.

Nothing here waits on a dead network: before the hub is asked, its address is tried with a short
timeout (:data:`NETWORK_TIMEOUT`), and ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` are honoured
(the local cache only). ``datasets`` is imported only when a hub id is loaded.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opct.datasets.errors import DataFetchError, DatasetFormatError
from opct.errors import require_extra

__all__ = [
    "HUB_PREFIX",
    "NETWORK_TIMEOUT",
    "SOURCE_FORMS",
    "HubSpec",
    "check_reachable",
    "hub_endpoint",
    "hub_offline",
    "load_hub",
    "parse_hub_spec",
]

HUB_PREFIX = "hf:"
#: Seconds to wait for a host to answer before saying there is no network.
NETWORK_TIMEOUT = 10.0
#: The accepted forms, for error messages.
SOURCE_FORMS = ("a .jsonl, .parquet, .csv or .json file, a datasets.save_to_disk folder, or a Hugging Face hub id "
                "owner/name[:config][@revision][#split]")

_HUB_ID = re.compile(
    r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)"
    r"(?::(?P<config>[\w.-]+))?(?:@(?P<revision>[\w./-]+))?(?:#(?P<split>[\w.-]+))?$"
)
#: Suffixes that make a string a (missing) file rather than a hub id.
_FILE_SUFFIXES = {".csv", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet", ".pq", ".arrow", ".txt", ".yaml", ".yml"}
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class HubSpec:
    """A data set on the Hugging Face hub: ``repo`` (owner/name), optional ``config``, ``revision``, ``split``."""

    repo: str
    config: str | None = None
    revision: str | None = None
    split: str | None = None
    #: True when written without ``hf:`` (a string that is no local path): errors then say so.
    implicit: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        text = HUB_PREFIX + self.repo
        if self.config:
            text += f":{self.config}"
        if self.revision:
            text += f"@{self.revision}"
        if self.split:
            text += f"#{self.split}"
        return text


def parse_hub_spec(source: str | os.PathLike[str]) -> HubSpec | None:
    """The :class:`HubSpec` that ``source`` names, or None when it is a local path.

    ``hf:...`` is always a hub id (a malformed one raises :class:`DatasetFormatError`); otherwise a
    string is a hub id only when no such local path exists, it reads ``owner/name[:config][@revision]
    [#split]`` and it has no file suffix (``data/math.jsonl`` stays a missing file).
    """
    text = str(source).strip()
    explicit = text.startswith(HUB_PREFIX)
    body = text[len(HUB_PREFIX):] if explicit else text
    match = _HUB_ID.match(body)
    if match is None:
        if explicit:
            raise DatasetFormatError(text, "not a hub id", hint="write hf:owner/name[:config][@revision][#split]")
        return None
    if not explicit and (Path(text).exists() or Path(match["repo"]).suffix.lower() in _FILE_SUFFIXES):
        return None
    return HubSpec(match["repo"], match["config"], match["revision"], match["split"], implicit=not explicit)


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` asks for the local cache only."""
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_endpoint() -> str:
    """The hub's address: ``HF_ENDPOINT`` or ``https://huggingface.co``."""
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or "https://huggingface.co"


def check_reachable(url: str, purpose: str, timeout: float = NETWORK_TIMEOUT) -> None:
    """Raise :class:`DataFetchError` unless the host of ``url`` answers within ``timeout`` seconds.

    Any HTTP answer counts (even 401 or 404: the host is there); proxies in the environment are used.
    ``purpose`` says what needed the network, for the message.
    """
    host = urllib.parse.urlsplit(url).netloc or url
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DataFetchError(
            f"no network: pass a local folder. {purpose}: cannot reach {host} within {timeout:g} s ({reason}). This needs the network; "
            "on a machine without it, copy the data from one that has it (`opct data fetch --to DIR` there, "
            "then copy DIR) and give the local folder or file instead (see docs/data.md)"
        ) from None


def load_hub(spec: HubSpec, timeout: float = NETWORK_TIMEOUT) -> Any:
    """``datasets.load_dataset`` for ``spec`` (a ``Dataset`` when it names a split, else a ``DatasetDict``).

    With ``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE`` set only the local cache is read; otherwise the hub
    must answer within ``timeout`` seconds first. Every failure is a :class:`DataFetchError` that names
    ``spec`` and what to do.
    """
    label = str(spec) + (" (no such local file or folder, so read as a Hugging Face hub id)" if spec.implicit else "")
    offline = hub_offline()
    if not offline:
        check_reachable(hub_endpoint(), f"{label}; a hub data set already in your Hugging Face cache loads without "
                        "network when HF_HUB_OFFLINE=1 is set", timeout)
    datasets = require_extra("datasets", "data", f"loading {spec} from the Hugging Face hub")
    try:
        return datasets.load_dataset(spec.repo, spec.config, revision=spec.revision, split=spec.split)
    except Exception as exc:  # datasets raises many types: connection, gated, missing revision/config/split
        raise DataFetchError(f"{label}: {_hub_failure(exc, offline)}") from None


def _hub_failure(exc: Exception, offline: bool) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    if offline:
        return (f"not in the local Hugging Face cache, and HF_HUB_OFFLINE (or HF_DATASETS_OFFLINE) is set ({text}). "
                "Unset it on a machine with network, or give a local copy (see docs/data.md)")
    low = text.lower()
    if any(word in low for word in ("gated", "401", "403", "authenticat")):
        return (f"access denied ({text}). Accept the data set's terms on huggingface.co and set HF_TOKEN, "
                "or give a local copy")
    if "revision" in low or "not found" in low or "doesn't exist" in low:
        return f"cannot load it ({text}). Check the id, the config, the revision and the split"
    return f"cannot load it from the Hugging Face hub ({text})"
