"""The registry of training methods, declared below :mod:`opct.config` so that a run's configuration can name
and validate its method without importing any: ``METHODS`` maps a method's name to its trainer class (an
import string until first use) and its :class:`MethodCard`. The methods register themselves in
:mod:`opct.methods` (loaded with the package, through :mod:`opct.wiring`); other layers register theirs
the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from opct.registry import Registry


@dataclass(frozen=True)
class MethodCard:
    """How a method is shown and compared: its display ``label``, the report's ``colour`` for it (None: the
    next free one of the report's palette), its ``order`` in tables (None: after every ordered method, by
    name) and its ``paper_role``: ``treatment`` or ``baseline`` of the paper's comparison (one method each)."""

    label: str
    colour: str | None = None
    order: int | None = None
    paper_role: Literal["treatment", "baseline"] | None = None


class MethodRegistry(Registry):
    """:class:`~opct.registry.Registry` of training methods, with each method's :class:`MethodCard` and the
    default method (:attr:`default`), both known without importing any method."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self._cards: dict[str, MethodCard] = {}
        self._default: str | None = None

    def register(self, name: str, obj: Any = None, *, replace: bool = False, card: MethodCard | None = None,
                 default: bool = False) -> Any:
        """:meth:`Registry.register`, plus the method's ``card`` (else the class's own ``card`` attribute,
        else its name in capitals) and, with ``default``, the method a run trains when it names none."""
        if obj is None:
            return super().register(name, obj, replace=replace)  # the decorator registers through here again
        registered = super().register(name, obj, replace=replace)
        if card is not None:
            self._cards[name] = card
        if default:
            self._default = name
        return registered

    def unregister(self, name: str) -> None:
        """Remove ``name`` and its card (no error if absent)."""
        super().unregister(name)
        self._cards.pop(name, None)

    @property
    def default(self) -> str:
        """The method a run trains when its configuration names none."""
        if self._default is None:
            raise LookupError(f"no default {self.kind} is registered")
        return self._default

    def card(self, name: str) -> MethodCard | None:
        """``name``'s card; None when no method of that name is registered (``base``, a variant, a run key)."""
        if name not in self:
            return None
        if name in self._cards:
            return self._cards[name]
        entry = self._entries[name]
        own = None if isinstance(entry, str) else getattr(entry, "card", None)
        return own if isinstance(own, MethodCard) else MethodCard(label=name.upper())

    def paper_pair(self) -> tuple[str, str]:
        """``(treatment, baseline)``: the methods whose difference the paper's claims are about."""
        roles = {role: [n for n in self.names() if (c := self.card(n)) is not None and c.paper_role == role]
                 for role in ("treatment", "baseline")}
        if any(len(found) != 1 for found in roles.values()):
            raise LookupError(f"the paper's pair needs one treatment and one baseline {self.kind}, found {roles}")
        return roles["treatment"][0], roles["baseline"][0]


#: Every training method by name; filled by :mod:`opct.methods` and the layers that add one.
METHODS: MethodRegistry = MethodRegistry("training method")
