"""A toy attacker as a plugin writes one, in this one file: it asks every organism behaviour once, as its bare
request, of a target that always refuses, and writes its results like the built-in attackers. Registered in
ATTACKERS, ``opct attack --strategy one-shot`` runs it, and so does an experiment with ``attack.strategy: one-shot``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from opct.attack.grammar import Attack
from opct.attack.organism_behaviors import organism_behaviors
from opct.attack.results import write_attack_results
from opct.attack.scorers import make_scorer
from opct.attack.search import Attempt, BehaviorOutcome

REFUSAL = "I can't help with that."


class OneShotAttack:
    """One plain query per behaviour (``budget`` must be 1: the toy has no search)."""

    name: ClassVar[str] = "one-shot"

    def check(self, config: Any) -> None:
        if config.budget != 1:
            raise ValueError(f"--budget {config.budget}: the one-shot attacker asks each behaviour once; use --budget 1")

    def rounds(self, config: Any) -> int:
        return 1

    def run(self, config: Any, progress: Callable[[int, int], None] | None = None) -> Path:
        score = make_scorer("organism")
        outcomes = []
        for behavior in organism_behaviors(config.split):
            prompt = Attack().render(behavior)
            harm = score(behavior, prompt, REFUSAL)
            attempt = Attempt(1, prompt, REFUSAL, harm, Attack())
            cracked = harm is not None and harm >= config.threshold
            outcomes.append(BehaviorOutcome(behavior, [attempt], cracked, 1 if cracked else None))
        if progress is not None:
            progress(1, 1)
        info = {"model": config.target_spec().name_or_path, "attacker": self.name, "threshold": config.threshold, "budget": 1}
        return write_attack_results(outcomes, config.out, info, max_unscored=config.max_unscored)
