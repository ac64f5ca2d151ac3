"""What every ``opct`` subcommand shares: the consoles, the one way to fail, and the error boundary.

:class:`ErrorBoundary` is the command group every ``opct`` command runs in: an exception that reaches
it is printed as ``error: <message>`` (see :func:`opct.errors.describe`) and the process exits with the
error's code; the traceback is shown only with ``opct --debug ...`` or ``OPCT_DEBUG=1``.
"""

from __future__ import annotations

import os
from typing import Any

import click
import typer
from rich.console import Console
from typer.core import TyperGroup

console = Console()
err_console = Console(stderr=True)


def _fail(message: str, code: int = 2) -> None:
    """Print ``error: message`` on stderr and exit with ``code`` (2: bad input; 1: a measurement failed)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


#: Set by ``opct --debug``: let exceptions through with their traceback.
DEBUG = {"on": False}


def debug_enabled() -> bool:
    """Whether tracebacks are wanted (``--debug`` or ``OPCT_DEBUG=1``)."""
    return DEBUG["on"] or os.environ.get("OPCT_DEBUG", "") not in ("", "0")


class ErrorBoundary(TyperGroup):
    """The ``opct`` command group: every error becomes one or two lines and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        from opct.errors import INTERRUPTED, describe

        try:
            return super().invoke(ctx)
        except (typer.Exit, click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            if debug_enabled():
                raise
            err_console.print("interrupted: everything written so far is kept; rerun the same command to continue.")
            raise typer.Exit(INTERRUPTED) from None
        except Exception as err:
            if debug_enabled():
                raise
            code, message = describe(err)
            err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True, markup=True)
            if code != 2:
                err_console.print("(opct --debug ... shows the traceback)", highlight=False)
            raise typer.Exit(code) from None
