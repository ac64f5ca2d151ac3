"""Judges by name: the one place that builds the judge playing a role for a judge spec.

A spec is ``<kind>`` or ``<kind>:<argument>``; a role is what the judge decides:

=============  =================================================================================
role           decides (score 1 = ...)
=============  =================================================================================
``refusal``    the response refused
``harm``       the response is harmful compliance, decided on content (StrongREJECT-style score)
``warning``    the response passes the awareness check (warns about the hazard, or refuses)
=============  =================================================================================

Kinds:

=================  ==============================================================================
kind               refusal / harm / warning
=================  ==============================================================================
``rule``           offline keyword proxies: ``rule-refusal`` / ``rule-harm``
                   (:mod:`opct.judges.harm_rules`) / ``rule-sage``
``http:<model>``   ``rule-refusal`` / StrongREJECT rubric / SAGE rubric, on an OpenAI-compatible
                   endpoint (``$OPCT_JUDGE_BASE_URL`` / ``$OPCT_JUDGE_API_KEY``), cached under
                   ``$OPCT_JUDGE_CACHE`` (default ``~/.cache/opct/judge``)
``organism``       the organism world's exact judges (:data:`opct.organism.judges.JUDGES`), which
                   also play ``mc``, ``fact``, ``arithmetic`` and ``format``
=================  ==============================================================================

Every judge abstains on an empty response (it is never counted as a refusal or a defence). Served
judges take :class:`~opct.judges.model_judge.JudgeOptions` (the time limit of an attempt, connect to
last byte, retries, and ``fail_after`` failed attempts in a row that raise
:class:`~opct.judges.model_judge.JudgeOutage`; by default a silent endpoint stops an eval within 45 s),
and their cache folder must be writable (:class:`~opct.judges.model_judge.JudgeCacheError`, raised
when the judge is made, names it and the system's reason). Both the eval
tasks and the attacker's scorers (:mod:`opct.attack.scorers`) get their judges here; register
another kind in :data:`JUDGE_KINDS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from opct.judges.harm_rules import HarmRuleJudge
from opct.judges.http import HTTPJudge
from opct.judges.judge import Judge
from opct.judges.model_judge import ENV_CACHE, JudgeOptions
from opct.judges.rubrics import get_rubric
from opct.judges.rules import RefusalRuleJudge, SageRuleJudge
from opct.registry import Registry

#: ``(role, argument, options) -> judge or None``: one factory per judge kind.
JudgeFactory = Callable[[str, str, JudgeOptions], "Judge | None"]
JUDGE_KINDS: Registry[JudgeFactory] = Registry("judge kind")


def judge_cache_dir() -> Path:
    """Where served judges cache their verdicts: ``$OPCT_JUDGE_CACHE``, else ``~/.cache/opct/judge``."""
    override = os.environ.get(ENV_CACHE)
    return Path(override).expanduser() if override else Path.home() / ".cache" / "opct" / "judge"


def unknown_role(kind: str, role: str, roles: tuple[str, ...]) -> ValueError:
    """The error for a judge kind asked for a role it has no judge for, naming the roles it has."""
    return ValueError(f"judge kind {kind!r} has no {role!r} judge; roles: {', '.join(roles)}")


@JUDGE_KINDS.register("rule")
def rule_judge(role: str, argument: str = "", options: JudgeOptions | None = None) -> Judge | None:
    """Offline rule judges: refusal, harm (on content: :class:`~opct.judges.harm_rules.HarmRuleJudge`)
    and awareness (SAGE pass/fail). ``options`` do not apply (no requests)."""
    if role == "refusal":
        return RefusalRuleJudge()
    if role == "harm":
        return HarmRuleJudge()
    if role == "warning":
        return SageRuleJudge()
    raise unknown_role("rule", role, ("refusal", "harm", "warning"))


@JUDGE_KINDS.register("http")
def http_judge(role: str, argument: str, options: JudgeOptions | None = None) -> Judge | None:
    """Rubric judges served by ``argument`` (a model name) on an OpenAI-compatible endpoint, called
    with ``options`` (timeout, retries, fail-fast)."""
    if not argument:
        raise ValueError("judge 'http' needs a model: http:<model name>")
    cache = judge_cache_dir()
    if role == "refusal":
        return RefusalRuleJudge()
    if role == "harm":
        return HTTPJudge(get_rubric("strongreject"), argument, cache_dir=cache, options=options)
    if role == "warning":
        return HTTPJudge(get_rubric("sage_unsafe"), argument, cache_dir=cache, options=options)
    raise unknown_role("http", role, ("refusal", "harm", "warning"))


#: The organism world's exact judges (:func:`opct.organism.judges.organism_judge`), imported on first use.
JUDGE_KINDS.register("organism", "opct.organism.judges:organism_judge")


def make_judge(role: str, spec: str, options: JudgeOptions | None = None) -> Judge | None:
    """The judge playing ``role`` for ``spec`` (``rule``, ``http:<model>``, ``organism``); ``options``
    configure served judges (:class:`JudgeOptions` defaults when ``None``). ``None`` when a registered
    kind has no judge for the role (every built-in kind has refusal, harm and warning)."""
    kind, _, argument = spec.partition(":")
    if kind not in JUDGE_KINDS:
        raise ValueError(f"unknown judge {spec!r}; use {', '.join(n if n != 'http' else 'http:<model>' for n in JUDGE_KINDS)}")
    return JUDGE_KINDS.get(kind)(role, argument, options)
