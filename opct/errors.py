"""The one base class of every error opct reports to a user, and how the command line prints them.

Each class of user mistake has its own type (a bad config key: :class:`opct.config.ConfigError`, a
bad pair file: :class:`opct.pairs.PairFileError`, a missing model path:
:class:`opct.models.ModelNotFoundError`, ...). All of them are :class:`OpctError`\\ s: the command
line prints their message (one or two lines: the path or field, and what to do) and exits with their
``exit_code``, without a traceback unless ``--debug`` (or ``OPCT_DEBUG=1``) is given.

Exit codes: 2 for a mistake in the input (fix it and rerun), 1 for a fault or a failed measurement
(a full disk, a judge outage, an incomplete eval), 130 for an interruption.
"""

from __future__ import annotations

import errno
import importlib
import re
import urllib.parse
from types import ModuleType

USER_MISTAKE = 2
FAULT = 1
INTERRUPTED = 130


class OpctError(Exception):
    """Base of every error meant for the user; ``exit_code`` is what the command line exits with."""

    exit_code: int = USER_MISTAKE


class OpctWarning(UserWarning):
    """A notice opct gives the user (a cut line dropped, a setting ignored, where outputs go): one clean
    ``warning: <message>`` line on the command line."""


class DistributionError(OpctError, ValueError):
    """A distributed setup opct cannot train under (DeepSpeed, FSDP1, Megatron-LM, ...)."""


class MissingExtraError(OpctError, ImportError):
    """A package of one of opct's optional extras is not installed; the message names the extra to install."""


#: The pip package each optional module comes from, where its name differs from the module's.
_PACKAGES = {"math_verify": "math-verify", "pyarrow": "pyarrow (with datasets)", "lm_eval": "lm-eval"}


def require_extra(module: str, extra: str, needed_for: str) -> ModuleType:
    """Import ``module`` (a package of opct's ``extra``), or raise :class:`MissingExtraError` saying what
    needs it and ``pip install 'opct[<extra>]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        package = _PACKAGES.get(module.split(".")[0], module.split(".")[0])
        raise MissingExtraError(
            f"{needed_for} needs the {package} package, which is not installed ({err}). Install opct's "
            f"'{extra}' extra: pip install 'opct[{extra}]' (or pip install -e '.[{extra}]' in a checkout)"
        ) from err


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 request``, ``2 requests``: a count and its noun in the right number (``plural`` when not ``noun + s``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def with_article(word: str) -> str:
    """``an export``, ``an eval``, ``a report``: ``word`` after the indefinite article its first letter takes."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


#: A URL inside any text: a scheme, ``://`` and what follows up to a space, a quote or an angle bracket.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
#: The userinfo of a URL (``user:password@`` or ``token@``) up to the host.
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#@]*)@")
#: Query keys whose value is a credential (matched whole, any case, ``-`` and ``_`` alike): their values are hidden.
CREDENTIAL_KEYS = frozenset({
    "key", "apikey", "api_key", "xapikey", "x_api_key", "token", "access_token", "accesstoken", "auth_token", "id_token",
    "refresh_token", "bearer", "auth", "authorization", "secret", "client_secret", "password", "passwd", "pwd", "pass",
    "signature", "sig", "x_amz_signature", "x_amz_security_token", "x_goog_signature", "credential", "credentials",
    "session_token", "private_token", "code",
})
_QUERY_PAIR = re.compile(r"(?P<head>[?&;](?P<key>[^=&#;\s]+)=)(?P<value>[^&#;\s\"'<>]*)")


def _is_credential_key(key: str) -> bool:
    return urllib.parse.unquote(key).lower().replace("-", "_") in CREDENTIAL_KEYS


def redact_url(url: str) -> str:
    """``url`` with every credential it carries replaced by ``***``: the password of its userinfo
    (``http://alice:***@host/v1``), a userinfo that is a token alone (``http://***@host``, which clients send as
    Basic auth), and the value of every query key that names a credential (:data:`CREDENTIAL_KEYS`:
    ``?api_key=***``, ``&token=***``, ``&X-Amz-Signature=***``). The rest is kept as it is. The one way opct
    shows a URL that may carry a credential."""

    def userinfo(m: re.Match[str]) -> str:
        user, colon, _ = m.group("userinfo").partition(":")
        return f"{m.group('scheme')}{user}:***@" if colon else f"{m.group('scheme')}***@"

    def pair(m: re.Match[str]) -> str:
        return m.group("head") + ("***" if _is_credential_key(m.group("key")) and m.group("value") else m.group("value"))

    url = _USERINFO.sub(userinfo, url, count=1)
    return _QUERY_PAIR.sub(pair, url) if "=" in url else url


def redact_secrets(text: str) -> str:
    """``text`` with every credential in every URL in it replaced by ``***`` (:func:`redact_url`): applied to every
    error and warning the command line prints and every JSON file opct writes
    (:func:`opct.runs.atomic.write_json_atomic`), so that a credential given in a URL stays in memory."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text


def describe(err: BaseException) -> tuple[int, str]:
    """``(exit code, message)`` for any exception reaching the command line, with URL passwords hidden
    (:func:`redact_secrets`)."""
    code, message = _describe(err)
    return code, redact_secrets(message)


def _describe(err: BaseException) -> tuple[int, str]:
    if isinstance(err, OpctError):
        return err.exit_code, str(err)
    if isinstance(err, UnicodeDecodeError):
        return USER_MISTAKE, f"a file is not UTF-8 text ({err.reason} at byte {err.start}); save it as UTF-8"
    if isinstance(err, OSError):
        where = err.filename or "a file"
        if err.errno == errno.ENOSPC:
            return FAULT, (f"no space left on the device writing {where}. Everything finished before it is kept: "
                           "free some space and rerun the same command to continue.")
        if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return USER_MISTAKE, f"cannot write {where}: {err.strerror}. Choose a writable output folder."
        if isinstance(err, FileNotFoundError):
            return USER_MISTAKE, f"no such file or folder: {err.filename}" if err.filename else str(err)
        if err.errno == errno.ELOOP:
            return USER_MISTAKE, f"{where}: a symlink loop (a link that leads back to itself); fix the link or choose another path"
        if isinstance(err, NotADirectoryError | IsADirectoryError | FileExistsError):
            return USER_MISTAKE, f"{where}: {err.strerror} (a file where a folder is needed, or the reverse)"
        return FAULT, f"{where}: {err.strerror or err}"
    if isinstance(err, ValueError):
        return USER_MISTAKE, str(err)
    if isinstance(err, RuntimeError) and str(err).startswith("Symlink loop from "):  # pathlib's resolve()
        path = str(err).removeprefix("Symlink loop from ")
        return USER_MISTAKE, f"{path}: a symlink loop (a link that leads back to itself); fix the link or choose another path"
    return FAULT, f"internal error: {type(err).__name__}: {err}"
