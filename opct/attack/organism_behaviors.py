"""The organism's world as an attack surface: its behaviours, every wrapper family, its exact judge."""

from __future__ import annotations

from opct.attack.grammar import AttackBehavior, Wrapper
from opct.axes.jailbreak.templates import ORGANISM, wrap
from opct.organism.items import bare_request
from opct.organism.world import world


def organism_wrappers(world: object | None = None) -> list[Wrapper]:
    """Every organism wrapper of :data:`opct.axes.jailbreak.templates.ORGANISM`, train and held-out
    families alike (the attacker is unconstrained)."""
    return [Wrapper(t.family, t.text, lambda req, core, t=t: wrap(t, req, core)) for t in ORGANISM.templates()]


def organism_behaviors(split: str, seed: int | None = None) -> list[AttackBehavior]:
    """The world's harmful behaviours of ``split``, as bare requests with their core phrase."""
    return [AttackBehavior(b.id, bare_request(b.core), b.core, b.category) for b in world(seed).behaviors if b.split == split]
