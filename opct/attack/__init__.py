"""The adaptive per-target attacker: a budgeted search (default) and a model attacker (PAIR-style, GRPO-trainable)."""

from opct.attack.grammar import Attack, AttackBehavior, Wrapper
from opct.attack.search import BehaviorOutcome, SearchAttacker, SearchConfig

__all__ = ["Attack", "AttackBehavior", "BehaviorOutcome", "SearchAttacker", "SearchConfig", "Wrapper"]
