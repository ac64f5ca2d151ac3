"""Where a served judge (or model attacker) sends the model's outputs, checked before anything is generated.

The URL must be ``http://`` or ``https://`` with a host; an API key never crosses the network over plain
``http://`` unless ``$OPCT_ALLOW_PLAIN_HTTP_KEY=1`` says the network is trusted; and a host other than this
machine is named once, so that the user sees where the outputs go.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
import warnings

from opct.errors import OpctWarning, redact_url

#: Set to 1 to send an API key over plain ``http://`` to a host that is not this machine (a trusted network).
ENV_ALLOW_PLAIN_HTTP_KEY = "OPCT_ALLOW_PLAIN_HTTP_KEY"
_NOTIFIED: set[tuple[str, str]] = set()


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint(url: str, has_key: bool, what: str = "judge", env_url: str = "OPCT_JUDGE_BASE_URL",
                   env_key: str = "OPCT_JUDGE_API_KEY") -> None:
    """Check a served model's endpoint before anything is generated: an ``http://`` or ``https://`` URL with a
    host (``file://``, ``ftp://`` are errors naming the URL), and no API key over plain ``http://`` to a host
    other than this machine unless ``$OPCT_ALLOW_PLAIN_HTTP_KEY=1``. A host other than this machine gets
    one warning naming it: the model's outputs go there. Credentials in the URL (``http://user:pw@host``) and
    an API key together are refused: which one the server would see is not obvious, so the user picks one.
    Every message shows the URL with its password as ``***`` (:func:`opct.errors.redact_url`)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    shown = redact_url(url)
    if parts.scheme not in ("http", "https") or not host:
        raise ValueError(f"{what} endpoint {shown!r} ({env_url}) is not an http:// or https:// URL with a host "
                         "(e.g. http://localhost:8000/v1); opct asks a server over HTTP only")
    if has_key and (parts.username or parts.password):
        raise ValueError(f"{what} endpoint {shown} ({env_url}) carries credentials and {env_key} is set too: give "
                         f"one of them (the URL's user:password is sent as HTTP basic auth, {env_key} as a bearer "
                         "token); unset one and rerun")
    if _is_loopback(host):
        return
    if has_key and parts.scheme == "http" and os.environ.get(ENV_ALLOW_PLAIN_HTTP_KEY) != "1":
        raise ValueError(f"{what} endpoint {shown} is plain http:// to another machine ({host}): the API key ({env_key}) "
                         f"would cross the network unencrypted. Use https://, or set {ENV_ALLOW_PLAIN_HTTP_KEY}=1 if "
                         "that network is trusted")
    if (what, host) not in _NOTIFIED:
        _NOTIFIED.add((what, host))
        warnings.warn(f"the {what} is served by {host} ({shown}): the model's outputs are sent there", OpctWarning,
                      stacklevel=3)
