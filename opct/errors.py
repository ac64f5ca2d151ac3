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


#: ``scheme://user:password@`` inside any text: the password part is what :func:`redact_secrets` hides.
_URL_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:\"'<>]*:)(?P<secret>[^\s/@\"'<>]+)(?=@)")


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo replaced by ``***`` (``http://alice:***@host/v1``); a URL
    without a password is returned as it is. The one way opct shows a URL that may carry a credential."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def redact_secrets(text: str) -> str:
    """``text`` with every URL password in it replaced by ``***`` (see :func:`redact_url`): applied to every
    error and warning the command line prints and every JSON file opct writes
    (:func:`opct.runs.atomic.write_json_atomic`), so that a credential given in a URL stays in memory."""
    return _URL_USERINFO.sub(lambda m: m.group("head") + "***", text) if "://" in text else text


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
