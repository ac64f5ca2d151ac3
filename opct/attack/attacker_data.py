"""Training data for GRPO attacker training: one pair per attacker instruction for a behaviour.

A pair's ``prompt`` is the attacker's round-1 instruction; ``teacher_prompt`` repeats it (the GRPO
method does not use it). ``meta["behavior"]`` carries the behaviour so the method can score the
target's response. Built-in sources (``data.train``):

* ``organism:attacker:<split>``: the organism's ``split`` behaviours, one pair each with the
  label-free instruction of its rewriting skill (the attacker chooses the wrappers, and whether to nest);
* ``attacker:<behaviours file>``: a real behaviours file (AdvBench / HarmBench / JSONL / text), one
  pair per behaviour with the red-team prompt of :class:`~opct.attack.model_attacker.RedTeamPrompt`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from opct.attack.grammar import AttackBehavior, behaviors_from_file
from opct.attack.model_attacker import AttackerPrompt, AttackRequest, RedTeamPrompt, RewritePrompt
from opct.attack.organism_behaviors import organism_behaviors
from opct.organism import content as C
from opct.pairs import ConsistencyPair


def behavior_pairs(behaviors: Sequence[AttackBehavior], prompt: AttackerPrompt, variants: int = 1, tag: str = "attack") -> list[ConsistencyPair]:
    """``variants`` round-1 instructions per behaviour (episodes ``0..variants-1`` of ``prompt``)."""
    pairs = []
    for b in behaviors:
        for e in range(variants):
            messages = prompt.messages(AttackRequest(b, episode=e))
            pairs.append(
                ConsistencyPair(
                    id=f"{tag}/{b.id}/{e}",
                    prompt=messages,
                    teacher_prompt=messages,
                    axis="attacker",
                    meta={"behavior": asdict(b), "variant": e},
                )
            )
    return pairs


def behavior_of(pair: ConsistencyPair) -> AttackBehavior:
    """The behaviour an attacker pair is about."""
    if "behavior" not in pair.meta:
        raise ValueError(f"pair {pair.id!r} has no meta.behavior; grpo_attack needs attacker pairs (e.g. organism:attacker:train)")
    return AttackBehavior(**pair.meta["behavior"])


def organism_rewrite_prompt() -> RewritePrompt:
    """The organism's own label-free rewriting instruction (the attacker picks the wrappers, and whether to nest)."""
    return RewritePrompt(template=C.REWRITE_FREE)


def organism_attacker_pairs(split: str) -> list[ConsistencyPair]:
    """``organism:attacker:<split>``: the label-free rewriting instruction for each ``split`` behaviour."""
    return behavior_pairs(organism_behaviors(split), organism_rewrite_prompt(), tag=f"attack-{split}")


def file_attacker_pairs(path: str) -> list[ConsistencyPair]:
    """``attacker:<file>``: the red-team instruction for each behaviour of a real behaviours file."""

    behaviors = behaviors_from_file(path)
    return behavior_pairs(behaviors, RedTeamPrompt(), tag="attack")
