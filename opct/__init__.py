"""opct: On-Policy Consistency Training for Hugging Face causal language models.

The public API::

    import opct
    cfg = opct.load_config("configs/organism_opct.yaml")
    result = opct.train(cfg)

``train`` and ``load_config`` (training), ``evaluate``, ``attack`` and ``run_attack`` (an
``AttackConfig`` run by its registered attacker) (measurement), ``ConsistencyPair`` (the data contract)
and the registries ``METHODS``, ``PAIR_SOURCES``, ``MODEL_ALIASES``, ``AXES`` and ``ATTACKERS`` (where
plugins register). Heavy modules are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from opct.wiring import register_builtins

__version__ = "0.1.0"

register_builtins()

_EXPORTS = {
    "train": "opct.training.loop:train",
    "load_config": "opct.config:load_config",
    "RunConfig": "opct.config:RunConfig",
    "evaluate": "opct.evals.suite:evaluate",
    "attack": "opct.attack.run:attack_model",
    "run_attack": "opct.attack.attackers:run_attack",
    "AttackConfig": "opct.attack.attackers:AttackConfig",
    "ConsistencyPair": "opct.pairs:ConsistencyPair",
    "read_pairs": "opct.pairs:read_pairs",
    "METHODS": "opct.methods:METHODS",
    "PAIR_SOURCES": "opct.pairs:PAIR_SOURCES",
    "MODEL_ALIASES": "opct.config:MODEL_ALIASES",
    "AXES": "opct.axes:AXES",
    "ATTACKERS": "opct.attack.attackers:ATTACKERS",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'opct' has no attribute {name!r}")
    module, _, attr = _EXPORTS[name].partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
