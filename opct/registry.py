"""Named registries: the one way outer layers plug things into opct.

A :class:`Registry` maps a name to an object. An entry may be registered lazily as the string
``"package.module:attribute"``, imported on first :meth:`Registry.get`, so that ``import opct``
stays cheap and the training core never imports the layers that fill its registries (axes, the
attacker, the organism). Built-in entries are registered in :mod:`opct.wiring`.

An installed package adds its own entries through the entry-point group :data:`PLUGIN_GROUP`: each entry
point names a function that registers them. Plugins load once, the first time a registry does not find a
name, so a name a plugin adds resolves in every process (a ``--jobs`` worker, which imports only opct,
included), and ``import opct`` loads no plugin.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from opct.errors import OpctError

T = TypeVar("T")

#: The entry-point group of opct's plugins: ``name = "package.module:function"``, the function registering the
#: package's entries (``opct-lab`` registers its level builds' model aliases this way).
PLUGIN_GROUP = "opct.plugins"
_loaded_plugins: list[str] | None = None


class PluginError(OpctError):
    """An installed plugin that failed to load; the message names it, its package and what to do."""


def load_plugins() -> list[str]:
    """Call every installed :data:`PLUGIN_GROUP` entry point once (later calls return at once); returns the
    names of the plugins loaded, in the order loaded."""
    global _loaded_plugins
    if _loaded_plugins is not None:
        return _loaded_plugins
    _loaded_plugins = []
    for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        package = entry.dist.name if entry.dist else "an installed package"
        try:
            entry.load()()
        except Exception as exc:
            raise PluginError(f"the opct plugin {entry.name!r} ({entry.value}, from {package}) failed to load: "
                              f"{type(exc).__name__}: {exc}. Fix or reinstall {package}, or uninstall it.") from exc
        _loaded_plugins.append(entry.name)
    return _loaded_plugins


class UnknownNameError(OpctError, KeyError, ValueError):
    """A name that no entry of a registry has; the message lists the names that exist."""

    def __init__(self, kind: str, name: str, choices: list[str]):
        self.kind, self.name, self.choices = kind, name, choices
        super().__init__(f"unknown {kind} {name!r}; choose one of: {', '.join(choices) or '(none registered)'}")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """Names to objects (or to ``"module:attr"`` strings resolved on first use), in registration order."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T | str] = {}

    def register(self, name: str, obj: T | str | None = None, *, replace: bool = False) -> Any:
        """Register ``obj`` under ``name``; without ``obj``, return a decorator that registers its argument.

        Registering a taken name is an error unless ``replace`` is true (tests and plugins overriding
        a built-in say so explicitly).
        """
        if obj is None:

            def decorator(target: T) -> T:
                self.register(name, target, replace=replace)
                return target

            return decorator
        if name in self._entries and not replace:
            raise ValueError(f"{self.kind} {name!r} is already registered; pass replace=True to override it")
        self._entries[name] = obj
        return obj

    def unregister(self, name: str) -> None:
        """Remove ``name`` (no error if absent)."""
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        """The entry called ``name``, imported if it was registered lazily (plugins are loaded on a miss)."""
        if name not in self:
            raise UnknownNameError(self.kind, name, self.names())
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = _import(entry)
            self._entries[name] = entry
        return entry  # type: ignore[return-value]

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._entries)

    def items(self) -> Iterator[tuple[str, T]]:
        """``(name, entry)`` for every entry, importing lazy ones."""
        for name in self.names():
            yield name, self.get(name)

    def is_registered(self, name: str) -> bool:
        """Whether ``name`` is registered now, without loading plugins: what registration code checks to stay
        idempotent (``in`` loads the plugins on a miss)."""
        return name in self._entries

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is registered; a name not found loads the installed plugins and looks again."""
        if name in self._entries:
            return True
        load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"

