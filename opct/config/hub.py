"""Whether a name needs the Hugging Face hub, and a fast refusal when the hub cannot be reached.

``huggingface_hub`` retries a refused or silent connection for about a minute before it fails. opct asks
first: before a model or tokenizer is loaded by hub id, the hub's address (``HF_ENDPOINT`` or
huggingface.co, through the environment's proxies) must answer within :data:`HUB_TIMEOUT` seconds, else
:class:`NoNetworkError` says "no network: pass a local folder". ``HF_HUB_OFFLINE=1`` skips the question
(the local cache only, as transformers reads it). The answer is kept for the process.
"""

from __future__ import annotations

import functools
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from opct.errors import OpctError

#: Seconds the hub has to answer before a command stops (the whole check stays under 10 s).
HUB_TIMEOUT = 5.0
_TRUE = ("1", "true", "yes", "on")


class NoNetworkError(OpctError, OSError):
    """A hub id was given and the hub does not answer (an ``OSError`` too, as transformers' own is)."""


def hub_endpoint() -> str:
    """The hub's address: ``HF_ENDPOINT`` or ``https://huggingface.co``."""
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or "https://huggingface.co"


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) asks for the local cache only."""
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


@functools.cache
def _unreachable(url: str, timeout: float) -> str | None:
    """Why ``url``'s host did not answer within ``timeout`` seconds, or None when it answered (any HTTP status)."""
    try:
        # a new opener each time: urlopen's global one keeps the proxies of the environment it was first built in
        urllib.request.build_opener().open(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return str(getattr(exc, "reason", None) or exc)
    return None


def require_hub(name: str, what: str = "The model") -> None:
    """Raise :class:`NoNetworkError` when ``name`` (a hub id) would be fetched from a hub that does not answer
    within :data:`HUB_TIMEOUT` seconds; nothing when ``name`` is an existing local path or ``HF_HUB_OFFLINE`` is set."""
    if hub_offline() or Path(name).expanduser().exists():
        return
    url = hub_endpoint()
    reason = _unreachable(url, HUB_TIMEOUT)
    if reason is not None:
        host = urllib.parse.urlsplit(url).netloc or url
        raise NoNetworkError(
            f"no network: pass a local folder. {what} {name!r} is a Hugging Face hub id and {host} did not answer "
            f"within {HUB_TIMEOUT:g} s ({reason}). Give the path of a folder that holds it (copied from a machine "
            "with network, e.g. with `hf download`), or set HF_HUB_OFFLINE=1 if it is in your Hugging Face cache."
        )
