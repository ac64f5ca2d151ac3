"""What the outer layers plug into training: the judges and probes of validation
(:mod:`opct.training.validation`), by name, as ``"module:attr"`` strings imported on first use
(:mod:`opct.wiring` registers the organism's)."""

from __future__ import annotations

from opct.registry import Registry

#: ``name -> judge(axis, metas, answers) -> [True | False | None]``: does each answer do what the
#: teacher would (None: unscored). The organism registers ``organism``.
VALIDATION_JUDGES: Registry = Registry("validation judge")
#: ``name -> probe(generate) -> {task: accuracy}``; ``generate`` answers a list of chat prompts greedily.
CAPABILITY_PROBES: Registry = Registry("capability probe")
