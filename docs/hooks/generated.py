"""MkDocs hook: the reference pages generated from the code, so that they never go stale.

* ``<!-- generated: cli -->`` (docs/cli.md) becomes ``opct --help`` and ``opct <command> --help`` for
  every command and subcommand of the Typer app (:data:`opct.cli.main.app`), as the terminal prints it.
* ``<!-- generated: config -->`` (docs/config.md) becomes one table per pydantic settings model (key,
  type, default, description): a run file (:class:`opct.config.RunConfig`, its nested sections and
  every registered method's section), an experiment file
  (:class:`opct.experiments.runner.ExperimentConfig`), a selection file and an ``opct eval --config`` file.

The functions are plain Python (``tests/test_docs.py`` calls them too); mkdocs calls
:func:`on_page_markdown` for every page.
"""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

CLI_MARK = "<!-- generated: cli -->"
CONFIG_MARK = "<!-- generated: config -->"
HELP_WIDTH = 88


# ----------------------------------------------------------------------------------------------- CLI


def command_paths() -> list[list[str]]:
    """Every command of ``opct`` as its words after ``opct`` (``[]`` is ``opct`` itself), in help order."""
    import typer.main

    from opct.cli.main import app

    root = typer.main.get_command(app)
    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        if hasattr(command, "list_commands"):  # a group (Typer's own click or the click package)
            ctx = command.context_class(command, info_name=" ".join(["opct", *path]))
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name])

    walk(root, [])
    return paths


def command_help(path: list[str]) -> str:
    """``opct <path> --help`` as printed on a terminal of :data:`HELP_WIDTH` columns, without colour."""
    from typer.testing import CliRunner

    from opct.cli.main import app

    env = {"COLUMNS": str(HELP_WIDTH), "NO_COLOR": "1", "TERM": "dumb"}
    result = CliRunner().invoke(app, [*path, "--help"], prog_name="opct", env=env)
    if result.exit_code != 0:
        raise RuntimeError(f"opct {' '.join(path)} --help exited {result.exit_code}: {result.output}")
    return "\n".join(line.rstrip() for line in result.output.strip("\n").splitlines())


def cli_reference_markdown() -> str:
    """One section per command: its ``--help``."""
    parts = []
    for path in command_paths():
        name = " ".join(["opct", *path])
        level = "##" if len(path) <= 1 else "###"
        parts += [f"{level} `{name}`", "", "```text", command_help(path), "```", ""]
    return "\n".join(parts)


# -------------------------------------------------------------------------------------------- config


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def model_types(tp: Any) -> list[tuple[str, type[BaseModel]]]:
    """The settings models a field's type holds, each with the key suffix it sits under: a model
    (``""``), each model of a union, or the values of a ``dict[str, Model]`` (``".<name>"``)."""
    tp = _strip_annotated(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [("", tp)]
    if _is_union(tp):
        return [found for arg in typing.get_args(tp) for found in model_types(arg)]
    if typing.get_origin(tp) is dict:
        return [(".<name>" + suffix, m) for suffix, m in model_types(typing.get_args(tp)[1])]
    return []


def type_name(tp: Any) -> str:
    """A field's type as a reader of the YAML needs it: ``int``, ``list[str]``, ``"a" | "b"``, ``X | None``."""
    tp = _strip_annotated(tp)
    if tp is type(None):
        return "None"
    if tp is Any:
        return "any"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if _is_union(tp):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]"
    return getattr(tp, "__name__", str(tp))


def _constraints(field: Any) -> str:
    words = []
    for meta in field.metadata:
        for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"), ("min_length", "length ≥")):
            value = getattr(meta, attr, None)
            if value is not None:
                words.append(f"{sign} {value}")
    return f" ({', '.join(words)})" if words else ""


_UNSET = object()


def _field_default(field: Any) -> Any:
    """The value a field takes when the file leaves it out (``_UNSET`` when it must be given)."""
    if field.default is PydanticUndefined and field.default_factory is None:
        return _UNSET
    return field.get_default(call_default_factory=True)


def _show(value: Any) -> str:
    if value is _UNSET:
        return "required"
    return json.dumps(value, default=str, ensure_ascii=False)


def prose(text: str) -> str:
    """A docstring or description as one line of Markdown: reST literals and roles become code spans."""
    text = " ".join(text.split())
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _cell(text: str) -> str:
    """``text`` safe in a table cell: ``|`` escaped, and ``&``, ``<``, ``{`` outside code spans (``<x>``
    would be read as an HTML tag, ``{...}`` as an attribute list)."""
    parts = text.split("`")
    parts[::2] = [part.replace("&", "&amp;").replace("<", "&lt;").replace("{", "&#123;") for part in parts[::2]]
    return "`".join(parts).replace("|", "\\|")


def key_cell(key: str) -> str:
    """A settings key as its table cell: a code element that may break after a dot and nowhere else (a
    ``<wbr>`` after each dot; ``code.opct-key`` in ``docs/stylesheets/opct.css`` turns off breaking
    inside words), so ``train.sequences_per_microbatch`` never wraps mid-word on a narrow page."""
    escaped = key.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f'<code class="opct-key">{escaped.replace(".", ".<wbr>")}</code>'


def settings_models() -> list[tuple[str, type[BaseModel], str]]:
    """Every settings model a file reads, as ``(file, model, key prefix)``: the config reference's
    tables, and the models whose every key ``tests/test_docs.py`` requires a description of."""
    from opct.config import RunConfig
    from opct.evals.config import EvalConfig
    from opct.experiments.runner import ExperimentConfig
    from opct.methods import METHODS
    from opct_lab.selection.run import SelectionSettings

    return [("run", RunConfig, ""),
            *(("method", METHODS.get(name).config_class, f"{name}.") for name in METHODS.names()),
            ("experiment", ExperimentConfig, ""), ("selection", SelectionSettings, "selection."), ("eval", EvalConfig, "")]


def undocumented_keys() -> list[str]:
    """Every key of :func:`settings_models` (nested ones included) without a description."""
    missing: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            if not (field.description or "").strip():
                missing.append(f"{prefix}{name} ({model.__module__}.{model.__name__})")
            for suffix, sub in model_types(field.annotation):
                walk(sub, f"{prefix}{name}{suffix}.")

    for _, model, prefix in settings_models():
        walk(model, prefix)
    return list(dict.fromkeys(missing))


def model_table(model: type[BaseModel], prefix: str, defaults: BaseModel | None = None) -> tuple[list[str], list[Any]]:
    """The table rows of ``model``'s fields under ``prefix`` and the nested models to describe next.

    ``defaults`` is the instance the parent field defaults to, when it is one of ``model``: its values are
    the defaults (a section's own, e.g. OPCT's rollouts at temperature 1), not the class's.
    """
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    nested = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        value = getattr(defaults, name) if defaults is not None else _field_default(field)
        subs = model_types(field.annotation)
        for suffix, sub in subs:
            label = key + suffix if len(subs) == 1 else f"{key}{suffix} ({sub.__name__})"
            nested.append((label, key + suffix, sub, value if isinstance(value, sub) else None))
        type_text = type_name(field.annotation) + _constraints(field)
        default = "see below" if subs and isinstance(value, BaseModel) else _show(value)
        rows.append(f"| {key_cell(key)} | {_cell(type_text)} | {_cell(default)} | {_cell(prose(field.description or ''))} |")
    return rows, nested


def model_reference(
    model: type[BaseModel], title: str, prefix: str = "", level: int = 3, defaults: BaseModel | None = None
) -> list[str]:
    """``model``'s table, then one table per nested settings model (depth first)."""
    doc = prose((model.__doc__ or "").strip().split("\n\n")[0])
    rows, nested = model_table(model, prefix, defaults)
    intro = f"`{model.__name__}`: {_cell(doc)}" if doc else f"`{model.__name__}`"
    lines = ["#" * level + f" {title}", "", intro, "", *rows, ""]
    for label, key, sub, sub_defaults in nested:
        lines += model_reference(sub, f"`{label}`", key + ".", min(level + 1, 6), sub_defaults)
    return lines


def config_reference_markdown() -> str:
    """Every settings file's keys, from the pydantic models that read them (:func:`settings_models`)."""
    models = {(file, prefix): model for file, model, prefix in settings_models()}
    lines = ["## Run file (`opct train --config`)", ""]
    lines += model_reference(models["run", ""], "Top level")
    lines += ["### Method sections", "",
              "A run's method reads its settings from the section named after it; a section for another "
              "method is an error.", ""]
    for (file, prefix), model in models.items():
        if file == "method":
            lines += model_reference(model, f"`{prefix[:-1]}:`", prefix, 4)
    lines += ["## Experiment and study file (`opct run`, `opct demo`)", ""]
    lines += model_reference(models["experiment", ""], "Top level")
    lines += ["A study file has the same keys plus `families:` (family name -> model) and optionally "
              "`extends:` (an experiment file whose settings its own keys override).", ""]
    lines += ["## Selection file (`opct-lab select`)", "",
              "An experiment file plus a `selection:` block:", ""]
    lines += model_reference(models["selection", "selection."], "`selection:`", "selection.")
    lines += ["## Eval file (`opct eval --config`)", ""]
    lines += model_reference(models["eval", ""], "Top level")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- the hook


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the generated-content marks of a page with their content."""
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference_markdown())
    if CONFIG_MARK in markdown:
        markdown = markdown.replace(CONFIG_MARK, config_reference_markdown())
    return markdown
