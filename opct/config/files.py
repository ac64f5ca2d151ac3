"""Reading configuration files and ``--set`` overrides, and wording their problems for a person.

Every YAML settings file opct reads (a run, an eval, an experiment, a study) goes through
:func:`read_config_file`: a key repeated in one section is an error naming the file, the line and the
key. ``--set key.sub=value`` arguments go through :func:`parse_overrides`: a malformed one is an
error naming the argument and the expected form, never an internal error. A settings problem names
where the key came from (:class:`ConfigSource`: ``file:line`` or the ``--set`` argument) and, for an
unknown key, the key meant (a TRL name's opct key, or a near spelling: :mod:`opct.config.trl_names`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from opct.config.method_registry import METHODS
from opct.config.method_switch import MethodSwitchWarning as MethodSwitchWarning  # re-exported
from opct.config.method_switch import switch_method as switch_method  # re-exported
from opct.config.ranges import RANGE_ERRORS, field_at, must_be
from opct.config.trl_names import meaning_note, unknown_key_hint
from opct.errors import OpctError, read_text

ModelT = TypeVar("ModelT", bound=BaseModel)


class ConfigError(OpctError, ValueError):
    """A configuration problem, worded for the person who wrote the file."""


class ConfigSource(str):
    """The name of a settings tree's source for error messages (a file's path, or ``command line``), and
    where each of its dotted keys was written (:attr:`origins`: ``path:line`` or ``--set key=value``)."""

    origins: dict[str, str]

    def __new__(cls, name: str, origins: dict[str, str] | None = None) -> ConfigSource:
        made = super().__new__(cls, name)
        made.origins = dict(origins or {})
        return made

    def origin(self, loc: tuple[str, ...]) -> str:
        """Where the key at ``loc`` (or the nearest section above it) was written; the source's name if unknown."""
        for end in range(len(loc), 0, -1):
            found = self.origins.get(".".join(loc[:end]))
            if found is not None:
                return found
        return str(self)


def _key_lines(text: str, path: str | Path) -> dict[str, str]:
    """``dotted key -> "path:line"`` for every mapping key of a YAML text (its first document)."""
    out: dict[str, str] = {}

    def walk(node: yaml.Node, prefix: str) -> None:
        if not isinstance(node, yaml.MappingNode):
            return
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                dotted = f"{prefix}{key_node.value}"
                out[dotted] = f"{path}:{key_node.start_mark.line + 1}"
                walk(value_node, f"{dotted}.")

    try:
        walk(yaml.compose(text, Loader=yaml.SafeLoader), "")
    except yaml.YAMLError:  # already read by the strict loader; a line map is only for messages
        return {}
    return out


def apply_overrides(tree: dict[str, Any], source: str, items: list[str]) -> ConfigSource:
    """Set each ``--set key=value`` of ``items`` in ``tree`` (:func:`parse_overrides`); returns ``source`` with
    each overridden key's origin the ``--set`` argument (a key set whole drops the file lines below it)."""
    named = source if isinstance(source, ConfigSource) else ConfigSource(source)
    origins = dict(named.origins)
    for item, (key, value) in zip(items, parse_overrides(items), strict=True):
        set_dotted(tree, key, value)
        origins = {k: v for k, v in origins.items() if not k.startswith(f"{key}.")}
        origins[key] = f"--set {item}"
    return ConfigSource(str(named), origins)


def set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``value`` at the dotted key ``dotted`` (``optim.lr``) of the nested dict ``tree``, in place, making
    missing sections; a :class:`ConfigError` when a section on the way holds a value that is not a dict."""
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


def _format_validation_error(err: ValidationError, source: str, model: type[BaseModel] | None = None) -> str:
    """``<where>: <key>: <problem>`` for the first problem, one line more for each other one. ``<where>`` is
    where the key was written (``file:line``, ``--set key=value``) when ``source`` is a :class:`ConfigSource`
    that knows, else ``source``; an unknown key of ``model`` says what was meant (TRL's names, near spellings)."""
    problems = []
    for e in err.errors():
        parts = tuple(str(p) for p in e["loc"])
        loc = ".".join(parts) or "(top level)"
        where = source.origin(parts) if isinstance(source, ConfigSource) and parts else str(source)
        if e["type"] == "extra_forbidden":
            hint = unknown_key_hint(model, parts) if parts else ""
            advice = hint or "check its spelling (`opct train --print-config` lists every key)"
            problems.append((where, f"{loc}: unknown key; {advice}"))
        elif e["type"] in RANGE_ERRORS and (ranged := _out_of_range(model, parts)):
            written, allowed = ranged
            where = source.origin(written) if isinstance(source, ConfigSource) else str(source)
            why = "is not finite" if e["type"] == "finite_number" else "is out of range"
            problems.append((where, f"{'.'.join(written)}: {e.get('input')!r} {why}: it {allowed}"))
        else:
            note = meaning_note(parts)
            problems.append((where, f"{loc}: {e['msg']} (got {e.get('input')!r})" + (f"; {note}" if note else "")))
    (first_where, first), *rest = problems or [(str(source), "invalid configuration")]
    return "\n".join([f"{first_where}: {first}",
                      *(f"  {p}" if w == first_where else f"  {w}: {p}" for w, p in rest)])


def _out_of_range(model: type[BaseModel] | None, loc: tuple[str, ...]) -> tuple[tuple[str, ...], str] | None:
    """The number at ``loc`` as the file writes its key, and ``must be <its declared range>`` (and why, when the
    field says: :mod:`opct.config.ranges`); ``None`` when ``loc`` leads to no number field of ``model``."""
    if model is None or not loc:
        return None
    sections = {loc[0]: METHODS.get(loc[0]).config_class} if "method" in model.model_fields and loc[0] in METHODS else None
    field, written = field_at(model, loc, sections)
    allowed = must_be(field) if field is not None else ""
    return (written, allowed) if allowed else None


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


def read_config_file(path: str | Path | None, what: str = "config") -> tuple[dict[str, Any], ConfigSource]:
    """The mapping a YAML configuration file holds (``{}`` for no file; an empty file is an error) and its name
    for error messages.

    A key repeated in one section is an error naming the file, the line and the key (YAML alone would
    silently keep the last one)."""
    if path is None:
        return {}, ConfigSource("command line")
    try:
        text = read_text(path)  # not UTF-8: an error naming the file, the byte and the line
        loaded = yaml.load(text, Loader=_UniqueKeyLoader)
    except FileNotFoundError as err:
        raise ConfigError(f"{what} file not found: {path}") from err
    except _DuplicateKey as dup:
        raise ConfigError(f"{path}:{dup.line}: {dup.describe()}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if loaded is None:  # an empty file (or comments alone) would run every default: a mistake, never a plan
        raise ConfigError(f"{path}: the {what} file is empty (no settings); write its settings, or leave the file out")
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of settings")
    return loaded, ConfigSource(str(path), _key_lines(text, path))


def validate_config(model: type[ModelT], tree: dict[str, Any], source: str) -> ModelT:
    """``model.model_validate(tree)``, with every problem worded for the person who wrote ``source``."""
    try:
        return model.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source, model)) from None
