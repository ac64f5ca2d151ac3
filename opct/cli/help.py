"""Help that reads as written: conventional value names (``--budget INTEGER``, ``--set KEY=VALUE``, flags
bare), brackets shown as typed, and paragraphs that wrap to the terminal.

Typer renders every help text as Rich markup, which swallows a bracketed word (``[base,bct,opct,act]``
became nothing), and keeps the line breaks of a docstring's second paragraph (a sentence broken where
the source line ended). :func:`readable_help` escapes the markup and joins each paragraph's lines;
:func:`conventional_help` applies it to every command's and parameter's help.

Typer labels a value with its Python type (``<str>``, ``<list[str]>``, ``<path>``), and a flag, which
takes no value, with ``<bool>``. :func:`conventional_help` gives every parameter that has no explicit
``metavar=`` the name a Unix command line would show (TEXT, INTEGER, FLOAT, PATH), and flags none.
Options whose value has a shape (``KEY=VALUE``, ``FILE``, ``DIR``, ``N``) say so with ``metavar=``
where they are declared, which this leaves alone.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from rich.markup import escape

_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "path": "PATH", "Path": "PATH"}
_LIST = re.compile(r"^list\[(.*)\]$")


def conventional_name(typer_label: str) -> str:
    """``<int>`` -> ``INTEGER``, ``<list[Path]>`` -> ``PATH``, ``<a|b>`` -> ``[a|b]``."""
    inner = typer_label.strip().removeprefix("<").removesuffix(">")
    if m := _LIST.match(inner):
        inner = m.group(1)
    if inner in _NAMES:
        return _NAMES[inner]
    return inner.upper() if inner.isidentifier() else f"[{inner}]"


def readable_help(text: str | None) -> str | None:
    """``text`` as Typer's Rich help should get it: each paragraph one line (Rich wraps it to the terminal;
    a paragraph starting ``\\b`` keeps its lines) and Rich markup escaped, so brackets print as typed."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    joined = [p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs]
    return escape("\n\n".join(joined))


def tidy_command_help(command: Any) -> None:
    """:func:`readable_help` on ``command``'s own help, once."""
    if not getattr(command, "_opct_help_tidy", False):
        command._opct_help_tidy = True
        command.help = readable_help(command.help)


def _is_argument(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "argument"


def conventional_params(params: list[Any], ctx: Any) -> list[Any]:
    """Give each of ``params`` a conventional value name (in place); returns ``params``."""
    for param in params:
        if getattr(param, "_opct_conventional", False) or not hasattr(param, "display_type"):
            continue  # done already, or a Typer that shows no Python types
        param._opct_conventional = True
        if getattr(param, "help", None):
            param.help = readable_help(param.help)
        if _is_argument(param):
            name = conventional_name(param.display_type(ctx))  # its name column says "files..." already
            param.display_type_rich = lambda ctx, name=name: name  # the argument's type column
        elif param.metavar is None:
            is_flag = getattr(param, "is_flag", False) and not getattr(param, "count", False)
            param.metavar = "" if is_flag else conventional_name(param.display_type(ctx))
    return params


def conventional_help(command: Any, ctx: Any) -> None:
    """Conventional value names and readable help for ``command``'s parameters and its own help and,
    for a group, every subcommand's."""
    tidy_command_help(command)
    conventional_params(command.get_params(ctx), ctx)
    for sub in getattr(command, "commands", {}).values():
        conventional_help(sub, ctx)
