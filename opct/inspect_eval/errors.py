"""opct's errors under Inspect: one line, as ``opct`` prints them, not a Python traceback.

Inspect's command line prints a :class:`~inspect_ai._util.error.PrerequisiteError` as its message
alone; every other exception raised while a task is built or the ``opct`` provider loads its model
comes with a traceback. :func:`one_line_errors` turns an ordinary error (bad ``-T`` / ``-M`` arguments,
a missing model or data file, an unknown judge: anything :func:`opct.errors.describe` words for a
user) into an :class:`InspectError`, which is both. ``OPCT_DEBUG=1`` keeps the original exception.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from inspect_ai._util.error import PrerequisiteError

from opct.errors import OpctError, describe


class InspectError(OpctError, PrerequisiteError):
    """An opct error Inspect prints as its one-line message (``error: ...``), with opct's exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        OpctError.__init__(self, message)
        self.message = f"error: {message}"  # what Inspect prints
        self.exit_code = exit_code


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
        raise InspectError(f"{where}: {message}", code) from None
