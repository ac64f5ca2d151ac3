"""Griffe extension for the API page: opct's docstrings use reST roles and literals
(``:func:`name```, ````code````); Markdown renders them as code spans (`name`)."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def markdown_code(text: str) -> str:
    """``:role:`x``` and ````x```` as Markdown code spans."""
    return ROLE.sub(r"`\1`", text).replace("``", "`")


class RestRolesToMarkdown(griffe.Extension):
    """Rewrite every docstring's reST roles and double-backtick literals when it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_code(obj.docstring.value)
