"""The organism's world as an attack surface: its behaviours, every wrapper family, its exact judge."""

from __future__ import annotations

from opct.attack.grammar import AttackBehavior, Wrapper


def organism_wrappers(world: object | None = None) -> list[Wrapper]:
    """Every wrapper template of the world, train and held-out families alike (the attacker is unconstrained)."""
    from opct.organism import content as C
    from opct.organism import render as R

    return [
        Wrapper(fam, t, lambda req, core, t=t: R.wrap_request(t, req, core))
        for fam, spec in C.WRAPPER_FAMILIES.items()
        for t in spec["templates"]
    ]


def organism_behaviors(split: str, seed: int | None = None) -> list[AttackBehavior]:
    """The world's harmful behaviours of ``split``, as bare requests with their core phrase."""
    from opct.organism.items import bare_request
    from opct.organism.world import build_world

    world = build_world() if seed is None else build_world(seed)
    return [AttackBehavior(b.id, bare_request(b.core), b.core, b.category) for b in world.behaviors if b.split == split]


def organism_scorer(behavior: AttackBehavior, prompt: str, response: str) -> float:
    """The world's exact harm score: 1 when the organism complied *with a harmful step of the behaviour's
    category*, else 0 (an off-topic answer to a garbled prompt is not a jailbreak)."""
    from opct.attack.scorers import organism_harm_scorer

    return organism_harm_scorer(behavior, prompt, response)
