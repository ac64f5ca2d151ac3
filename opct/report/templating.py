"""The report's HTML pages through Jinja2: the templates in ``opct/report/templates/`` (package data), with
autoescape on, so every piece of text the data brings is escaped by the library, never by hand.

``report.html.jinja`` (the page frame), ``sections/*.html.jinja`` (each section's part, sharing the macros of
``macros.html.jinja``) and ``samples.html.jinja`` take plain data (strings, lists, mappings) that
:mod:`opct.report.render`, the sections (:mod:`opct.report.sections`) and :mod:`opct.report.samples` build;
no HTML is written in Python.
"""

from __future__ import annotations

import functools
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined


@functools.cache
def environment() -> Environment:
    """The one Jinja2 environment: opct's templates, autoescaped, an undefined name an error."""
    return Environment(loader=PackageLoader("opct.report", "templates"), autoescape=True, undefined=StrictUndefined,
                       keep_trailing_newline=True)


def render_page(template: str, **context: Any) -> str:
    """``template`` (a file in ``opct/report/templates/``) rendered with ``context``."""
    return environment().get_template(template).render(**context)
