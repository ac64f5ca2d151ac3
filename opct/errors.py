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
import io
import json
import os
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")

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


class FileContentError(OpctError, ValueError):
    """A file opct reads that it cannot read as what it should be (not UTF-8 text, not valid JSON: cut or
    damaged); the message names the file, where in it, and what to do."""


def not_utf8(path: str | Path, err: UnicodeDecodeError, remedy: str = "save it as UTF-8") -> FileContentError:
    """The :class:`FileContentError` for a file that is not UTF-8: its path, the byte offset and line of the
    first bad byte (when ``err`` decoded the whole file, as :func:`read_text` does), and ``remedy``."""
    data = err.object if isinstance(err.object, bytes) else b""
    line = f", line {data[: err.start].count(10) + 1}" if data else ""  # 10: the newline byte
    return FileContentError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}{line}); {remedy}")


def read_text(path: str | Path, remedy: str = "save it as UTF-8") -> str:
    """The text of the UTF-8 file ``path`` (newlines read as ``\\n``, as :meth:`pathlib.Path.read_text` reads
    them); a file that is not UTF-8 is a :class:`FileContentError` naming it, the byte and line, and
    ``remedy``. The one way opct reads a text file a person gives it."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, remedy) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_json(path: str | Path, remedy: str) -> Any:
    """The JSON value in ``path``; a file that is not UTF-8 or not valid JSON (a cut or damaged file) is a
    :class:`FileContentError` naming it, the line and column, and ``remedy`` (how to write it again)."""
    text = read_text(path, remedy)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise FileContentError(f"{path}: not valid JSON ({err.msg}: line {err.lineno}, column {err.colno}): the "
                               f"file is cut or damaged; {remedy}") from None


def damaged_json_file(folder: str | Path) -> tuple[Path, str] | None:
    """The first ``*.json`` file directly in ``folder`` that is not valid UTF-8 JSON, and why; None when all are
    (or ``folder`` is no folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    for file in sorted(folder.glob("*.json")):
        try:
            json.loads(file.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as err:
            return file, f"not UTF-8 text ({err.reason} at byte {err.start})"
        except json.JSONDecodeError as err:
            return file, f"not valid JSON ({err.msg}: line {err.lineno}, column {err.colno})"
        except OSError as err:
            return file, f"unreadable ({err.strerror or err})"
    return None


def load_folder(folder: str | Path, what: str, remedy: str, load: Callable[[], T]) -> T:
    """``load()``, which reads the local folder ``folder`` (``what``: ``the tokenizer``); when it fails and a
    JSON file in the folder is damaged (:func:`damaged_json_file`), a :class:`FileContentError` naming that file,
    that it is damaged, and ``remedy``, instead of the library's bare JSON error. Any other failure is raised
    as it was."""
    try:
        return load()
    except Exception:
        damaged = damaged_json_file(folder)
        if damaged is None:
            raise
        file, why = damaged
        raise FileContentError(f"{what} in {folder} cannot be loaded: {file} is {why}, a cut or damaged file; "
                               f"{remedy}") from None


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


def dangling_link(path: str | Path) -> tuple[Path, str] | None:
    """The symbolic link that ``path`` is, or goes through, whose target does not exist (``runs`` -> a deleted
    folder), and that target; None when there is none."""
    path = Path(path)
    for step in (path, *path.parents):
        if step.is_symlink() and not step.exists():
            return step, os.readlink(step)
    return None


def _dangling(where: str) -> str | None:
    found = dangling_link(where) if where else None
    if found is None:
        return None
    link, target = found
    return (f"{link} is a symbolic link to {target}, which does not exist; create {target}, or remove the link "
            f"(rm {link}) or give another path")


def _describe(err: BaseException) -> tuple[int, str]:
    if isinstance(err, OpctError):
        return err.exit_code, str(err)
    if isinstance(err, UnicodeDecodeError):
        name = _file_being_read(err)
        where = f"{name}: not UTF-8 text" if name else "a file opct read is not UTF-8 text"
        return USER_MISTAKE, f"{where} ({err.reason} at byte {err.start}); save it as UTF-8"
    if isinstance(err, OSError):
        return _describe_os_error(err)
    if isinstance(err, ValueError):
        return USER_MISTAKE, str(err)
    if isinstance(err, RuntimeError) and str(err).startswith("Symlink loop from "):  # pathlib's resolve()
        path = str(err).removeprefix("Symlink loop from ")
        return USER_MISTAKE, f"{path}: a symlink loop (a link that leads back to itself); fix the link or choose another path"
    return FAULT, f"internal error: {type(err).__name__}: {err}"


def _file_being_read(err: BaseException) -> str | None:
    """The name of the file an error was raised reading (a text or binary file object open in the innermost
    frame that holds one: ``Path.read_text``'s, or any ``with open(...) as f``); None when no frame holds one.
    What names the file of a decoding error that no reader caught (:func:`read_text` names it itself)."""
    frames = []
    tb = err.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in frame.f_locals.values():
            if isinstance(value, io.TextIOWrapper | io.BufferedReader):
                name = getattr(value, "name", None)
                if isinstance(name, str | os.PathLike):
                    return os.fspath(name)
    return None


def _describe_os_error(err: OSError) -> tuple[int, str]:
    """An OSError's message: the file it names (never a vague "a file": without one, no name), what went wrong,
    and what to do; a path through a symbolic link that leads nowhere names the link and its missing target."""
    name = str(err.filename) if err.filename is not None else ""
    what = err.strerror or str(err)
    if err.errno == errno.ENOSPC:
        return FAULT, (f"no space left on the device{f' writing {name}' if name else ''}. Everything finished before "
                       "it is kept: free some space and rerun the same command to continue.")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return USER_MISTAKE, f"cannot write {name or 'there'}: {what}. Choose a writable output folder."
    dangling = _dangling(name) or (_dangling(str(err.filename2)) if err.filename2 is not None else None)
    if dangling is not None and isinstance(err, FileNotFoundError | FileExistsError | NotADirectoryError):
        return USER_MISTAKE, dangling
    if isinstance(err, FileNotFoundError):
        return USER_MISTAKE, f"no such file or folder: {name}" if name else str(err)
    if err.errno == errno.ELOOP:
        return USER_MISTAKE, f"{name}: a symlink loop (a link that leads back to itself); fix the link or choose another path"
    if isinstance(err, NotADirectoryError | IsADirectoryError | FileExistsError):
        return USER_MISTAKE, f"{f'{name}: ' if name else ''}{what} (a file where a folder is needed, or the reverse)"
    if isinstance(err, BrokenPipeError):
        return FAULT, f"the output was closed before the command finished writing ({what}); nothing else went wrong"
    return FAULT, f"{name}: {what}" if name else what
