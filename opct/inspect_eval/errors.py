"""opct's errors under Inspect: one line, as ``opct`` prints them, not a Python traceback.

Inspect's command line prints an uncaught exception with a traceback (its own prerequisite errors
aside, whose class is not public API). :func:`one_line_errors` turns an ordinary error raised while
a task is built or the ``opct`` provider loads its model (bad ``-T`` / ``-M`` arguments, a missing
model or data file, an unknown judge: anything :func:`opct.errors.describe` words for a user) into an
:class:`InspectError`, and installs :func:`one_line_hook` in front of the process's exception hook,
which prints an :class:`InspectError` as its message alone and hands every other exception on.
``OPCT_DEBUG=1`` keeps the original exception.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from opct.errors import OpctError, describe

ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], Any]


class InspectError(OpctError):
    """An opct error printed under Inspect as its one-line message (``error: ...``), with opct's exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        OpctError.__init__(self, message)
        self.message = f"error: {message}"  # what is printed
        self.exit_code = exit_code


def one_line_hook(previous: ExceptHook) -> ExceptHook:
    """An exception hook that prints an :class:`InspectError` as its message, as Inspect prints its own
    prerequisite errors, and passes any other exception to ``previous``."""

    def hook(kind: type[BaseException], err: BaseException, tb: TracebackType | None) -> Any:
        if isinstance(err, InspectError):
            print(f"\n{err.message}\n", file=sys.stderr)
            return None
        return previous(kind, err, tb)

    hook.opct_one_line = True  # type: ignore[attr-defined]
    return hook


def install_one_line_hook() -> None:
    """Put :func:`one_line_hook` in front of ``sys.excepthook`` (once; Inspect's CLI sets its own first)."""
    if not getattr(sys.excepthook, "opct_one_line", False):
        sys.excepthook = one_line_hook(sys.excepthook)


@contextmanager
def one_line_errors(where: str) -> Iterator[None]:
    """Re-raise any error inside as an :class:`InspectError` worded by :func:`opct.errors.describe`,
    prefixed with ``where`` (e.g. ``task opct/jailbreak``); ``OPCT_DEBUG=1`` lets it through as it is."""
    try:
        yield
    except InspectError:
        raise
    except Exception as err:
        if os.environ.get("OPCT_DEBUG", "") not in ("", "0"):
            raise
        code, message = describe(err)
        install_one_line_hook()
        raise InspectError(f"{where}: {message}", code) from None
