"""Judges by name: the one place that builds the judge playing a role for a judge spec.

A spec is ``<kind>`` or ``<kind>:<argument>``; a role is what the judge decides:

=============  =================================================================================
role           decides (score 1 = ...)
=============  =================================================================================
``refusal``    the response refused
``harm``       the response is harmful compliance (StrongREJECT-style score)
``warning``    the response passes the awareness check (warns about the hazard, or refuses)
=============  =================================================================================

Kinds: ``rule`` (offline keyword rules, harm decided on content: :mod:`opct.judges.harm_rules`), ``http:<model>``
(rubric judges on an OpenAI-compatible endpoint, ``$OPCT_JUDGE_BASE_URL`` / ``$OPCT_JUDGE_API_KEY``,
cached under ``~/.cache/opct/judge``; refusal stays the rule judge) and ``organism`` (the organism
world's exact judges, :data:`opct.organism.judges.JUDGES`, which also play ``mc``, ``fact``,
``arithmetic`` and ``format``). Both the eval tasks and the attacker's scorers
(:mod:`opct.attack.scorers`) get their judges here; register another kind in :data:`JUDGE_KINDS`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from opct.judges.base import Judge
from opct.registry import Registry

#: ``(role, argument) -> judge or None``: one factory per judge kind.
JudgeFactory = Callable[[str, str], "Judge | None"]
JUDGE_KINDS: Registry[JudgeFactory] = Registry("judge kind")


def _unknown_role(kind: str, role: str, roles: tuple[str, ...]) -> ValueError:
    return ValueError(f"judge kind {kind!r} has no {role!r} judge; roles: {', '.join(roles)}")


@JUDGE_KINDS.register("rule")
def rule_judge(role: str, argument: str = "") -> Judge | None:
    """Offline rule judges: refusal, harm (on content: :class:`~opct.judges.harm_rules.HarmRuleJudge`)
    and awareness (SAGE pass/fail)."""
    from opct.judges.harm_rules import HarmRuleJudge
    from opct.judges.rules import RefusalRuleJudge, SageRuleJudge

    if role == "refusal":
        return RefusalRuleJudge()
    if role == "harm":
        return HarmRuleJudge()
    if role == "warning":
        return SageRuleJudge()
    raise _unknown_role("rule", role, ("refusal", "harm", "warning"))


@JUDGE_KINDS.register("http")
def http_judge(role: str, argument: str) -> Judge | None:
    """Rubric judges served by ``argument`` (a model name) on an OpenAI-compatible endpoint."""
    from opct.judges.http import HTTPJudge
    from opct.judges.rubrics import get_rubric
    from opct.judges.rules import RefusalRuleJudge

    if not argument:
        raise ValueError("judge 'http' needs a model: http:<model name>")
    cache = Path.home() / ".cache" / "opct" / "judge"
    if role == "refusal":
        return RefusalRuleJudge()
    if role == "harm":
        return HTTPJudge(get_rubric("strongreject"), argument, cache_dir=cache)
    if role == "warning":
        return HTTPJudge(get_rubric("sage_unsafe"), argument, cache_dir=cache)
    raise _unknown_role("http", role, ("refusal", "harm", "warning"))


@JUDGE_KINDS.register("organism")
def organism_judge(role: str, argument: str = "") -> Judge | None:
    """The organism world's exact judges, decided from the ground truth in each item's meta."""
    from opct.organism.judges import JUDGES

    if role not in JUDGES:
        raise _unknown_role("organism", role, tuple(JUDGES))
    return JUDGES[role]


def make_judge(role: str, spec: str) -> Judge | None:
    """The judge playing ``role`` for ``spec`` (``rule``, ``http:<model>``, ``organism``), or ``None``
    when that kind has no judge for the role (``harm`` under ``rule``)."""
    kind, _, argument = spec.partition(":")
    if kind not in JUDGE_KINDS:
        raise ValueError(f"unknown judge {spec!r}; use {', '.join(n if n != 'http' else 'http:<model>' for n in JUDGE_KINDS)}")
    return JUDGE_KINDS.get(kind)(role, argument)
