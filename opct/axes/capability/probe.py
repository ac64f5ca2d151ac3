"""The organism's capability probe during training (registered as ``organism``; see
:mod:`opct.training.validation`).

:func:`capability_probe`: greedy accuracy on validation capability items, disjoint from the
evaluation's: the four organism capability tasks (multiple-choice facts, arithmetic, worked
multi-step arithmetic, format following), :data:`ITEMS_PER_TASK` items each, drawn from what the
evaluation's seeded sample leaves (compared by prompt text). An unreadable or empty answer counts
as wrong here: the probe guards against damage, so a missing answer is no excuse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opct.axes.capability.tasks import ORGANISM_ITEMS
from opct.evals.contract import seeded_sample
from opct.organism import items as I
from opct.organism.judges import JUDGES
from opct.organism.world import world

#: Validation items per capability task (all that are left when fewer).
ITEMS_PER_TASK = 40
_ROLES = {"capability_mc": "mc", "capability_arithmetic": "arithmetic", "capability_chain": "chain",
          "capability_format": "format"}


def validation_items() -> dict[str, list[dict[str, Any]]]:
    """``{task: items}``: the capability items of the validation probe (none is an evaluation item)."""
    w = world()
    eval_pools = {
        "capability_mc": I.capability_mc(w),
        "capability_arithmetic": I.capability_arithmetic(w),
        "capability_chain": I.capability_chain(w),
        "capability_format": I.capability_format(w),
    }
    wide_pools = {
        "capability_mc": eval_pools["capability_mc"],
        "capability_arithmetic": I.capability_arithmetic(w, n=len(I.arithmetic_problems())),
        "capability_chain": I.capability_chain(w, n=4 * len(eval_pools["capability_chain"])),
        "capability_format": I.capability_format(w, per_format=120),
    }
    out = {}
    for name, pool in eval_pools.items():  # the evaluation's units, as the capability tasks sample them
        asked = {_prompt(x) for x in seeded_sample(pool, ORGANISM_ITEMS, f"organism-eval-{name}")}
        unseen = {_prompt(x): x for x in wide_pools[name] if _prompt(x) not in asked}
        out[name] = seeded_sample(list(unseen.values()), ITEMS_PER_TASK, f"organism-validation-{name}")
    return out


def _prompt(item: dict[str, Any]) -> str:
    return item["prompt"][-1]["content"]


def capability_probe(generate: Callable[[list[list[dict[str, str]]]], list[str]]) -> dict[str, float]:
    """Greedy accuracy per validation capability task; ``generate`` answers a list of chat prompts."""
    scores: dict[str, float] = {}
    for name, items in validation_items().items():
        answers = generate([x["prompt"] for x in items])
        judge = JUDGES[_ROLES[name]]
        correct = [bool(a.strip()) and judge.judge(_prompt(x), a, x["meta"]).score >= 0.5
                   for x, a in zip(items, answers, strict=True)]
        scores[name] = sum(correct) / len(correct)
    return scores
