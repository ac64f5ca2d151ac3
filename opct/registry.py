"""Named registries: the one way outer layers plug things into opct.

A :class:`Registry` maps a name to an object. An entry may be registered lazily as the string
``"package.module:attribute"``, imported on first :meth:`Registry.get`, so that ``import opct``
stays cheap and the training core never imports the layers that fill its registries (axes, the
attacker, the organism). Built-in entries are registered in :mod:`opct.wiring`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from opct.errors import OpctError

T = TypeVar("T")


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
        """The entry called ``name``, imported if it was registered lazily."""
        if name not in self._entries:
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

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"

