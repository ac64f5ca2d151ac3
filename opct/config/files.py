"""Reading configuration files and ``--set`` overrides, and wording their problems for a person.

Every YAML settings file opct reads (a run, an eval, an experiment, a study) goes through
:func:`read_config_file`: a key repeated in one section is an error naming the file, the line and the
key. ``--set key.sub=value`` arguments go through :func:`parse_overrides`: a malformed one is an
error naming the argument and the expected form, never an internal error.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from opct.errors import OpctError

ModelT = TypeVar("ModelT", bound=BaseModel)


class ConfigError(OpctError, ValueError):
    """A configuration problem, worded for the person who wrote the file."""


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for key in keys[:-1]:
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {dotted}: '{key}' is not a section")
        node = child
    node[keys[-1]] = value


class MethodSwitchWarning(UserWarning):
    """A run's method changed on the command line and the file's section for its old method was dropped."""


def switch_method(tree: dict[str, Any], file_method: str, overridden: Collection[str], methods: Collection[str]) -> None:
    """Drop the section of ``file_method`` (the method the file names, the default method when it names none) from
    ``tree`` when ``--set method=...`` / ``--method`` chose another registered method, with a one-line
    :class:`MethodSwitchWarning` naming the dropped keys. A section the overrides themselves wrote
    (``overridden``: their dotted keys) is kept, so that it is refused as a section of another method."""
    from opct.config.method_registry import METHODS

    method = tree.get("method", METHODS.default)
    section = tree.get(file_method)
    if method == file_method or method not in methods or file_method not in methods or section is None:
        return
    if any(key == file_method or key.startswith(f"{file_method}.") for key in overridden):
        return
    del tree[file_method]
    keys = ", ".join(f"{file_method}.{k}" for k in section) if isinstance(section, dict) and section else file_method
    warnings.warn(f"method switched from {file_method} to {method}: dropped the {file_method} section ({keys})",
                  MethodSwitchWarning, stacklevel=3)


_OVERRIDE_FORM = "expected key=value, its sections joined by dots (key.sub=value), e.g. --set optim.lr=1e-5"


def parse_overrides(items: list[str]) -> list[tuple[str, Any]]:
    """Parse ``key.sub=value`` strings; values are read as YAML (numbers, booleans, lists...).

    A malformed one is a :class:`ConfigError` naming the ``--set`` argument and the expected form."""
    out = []
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigError(f"--set {item!r}: no '=' in it; {_OVERRIDE_FORM}")
        parts = key.split(".")
        if not key or any(not part or part != part.strip() or " " in part for part in parts):
            raise ConfigError(
                f"--set {item!r}: the key {key!r} is not a dotted setting name (empty or spaced parts); {_OVERRIDE_FORM}"
            )
        try:
            value = yaml.load(raw, Loader=_UniqueKeyLoader) if raw.strip() else ""
        except _DuplicateKey as dup:
            raise ConfigError(f"--set {item!r}: {dup.describe()}") from None
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise ConfigError(
                f"--set {item!r}: the value {raw!r} is not valid YAML ({problem}); {_OVERRIDE_FORM}; "
                "quote text with YAML characters in it, e.g. --set 'name=\"a: b\"'"
            ) from None
        out.append((key, value))
    return out


def _format_validation_error(err: ValidationError, source: str) -> str:
    """``<source>: <key>: <problem>`` for the first problem, one line more for each other one."""
    problems = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            problems.append(f"{loc}: unknown key; check its spelling (`opct train --print-config` lists every key)")
        else:
            problems.append(f"{loc}: {e['msg']} (got {e.get('input')!r})")
    first, *rest = problems or ["invalid configuration"]
    return "\n".join([f"{source}: {first}", *(f"  {p}" for p in rest)])


class _DuplicateKey(Exception):
    """A key given twice in one YAML mapping (raised while the file is read, turned into a ConfigError)."""

    def __init__(self, key: Any, line: int, first_line: int) -> None:
        super().__init__(key, line, first_line)
        self.key, self.line, self.first_line = key, line, first_line

    def describe(self) -> str:
        return (f"key {self.key!r} is given twice in one section (first on line {self.first_line}); YAML would keep "
                "only the last one: remove or merge one of them")


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key repeated in one mapping (``<<`` merge keys may still be overridden)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in first:
                raise _DuplicateKey(key, line, first[key])
            first[key] = line
        return super().construct_mapping(node, deep=deep)


def read_config_file(path: str | Path | None, what: str = "config") -> tuple[dict[str, Any], str]:
    """The mapping a YAML configuration file holds (``{}`` for no file) and its name for error messages.

    A key repeated in one section is an error naming the file, the line and the key (YAML alone would
    silently keep the last one)."""
    if path is None:
        return {}, "command line"
    try:
        loaded = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except FileNotFoundError as err:
        raise ConfigError(f"{what} file not found: {path}") from err
    except _DuplicateKey as dup:
        raise ConfigError(f"{path}:{dup.line}: {dup.describe()}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of settings")
    return loaded or {}, str(path)


def validate_config(model: type[ModelT], tree: dict[str, Any], source: str) -> ModelT:
    """``model.model_validate(tree)``, with every problem worded for the person who wrote ``source``."""
    try:
        return model.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None
