"""Judges decide what a response did: refused, complied, warned, answered which option.

Rule judges (:mod:`opct.judges.rules`, :mod:`opct.judges.harm_rules`) need no model; rubric judges
run a rubric prompt (:mod:`opct.judges.rubrics`) on an OpenAI-compatible endpoint (:class:`HTTPJudge`)
or a local Hugging Face model (:class:`HFJudge`), with a disk cache and abstention instead of crashes
(and :class:`JudgeOutage` when a served judge is down; :class:`JudgeOptions` sets when).
:func:`make_judge` builds the judge playing a role (refusal, harm, warning...) for a judge spec.
"""

from opct.judges.factory import JUDGE_KINDS, make_judge
from opct.judges.harm_rules import HarmRuleJudge
from opct.judges.hf import HFJudge
from opct.judges.http import HTTPJudge
from opct.judges.judge import Judge, Verdict
from opct.judges.model_judge import JudgeOptions, JudgeOutage
from opct.judges.rubrics import get_rubric
from opct.judges.rules import RefusalRuleJudge, SageRuleJudge, WarningRuleJudge

__all__ = [
    "JUDGE_KINDS",
    "HFJudge",
    "HTTPJudge",
    "HarmRuleJudge",
    "Judge",
    "JudgeOptions",
    "JudgeOutage",
    "RefusalRuleJudge",
    "SageRuleJudge",
    "Verdict",
    "WarningRuleJudge",
    "get_rubric",
    "make_judge",
]
