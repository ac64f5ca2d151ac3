"""Offline IFEval (Zhou et al. 2023): instruction checkers, strict/loose evaluation and metrics.

Checkers are written from the published instruction definitions; nothing is downloaded at run time
(sentence splitting is rule-based, language detection is langdetect when installed or a built-in
heuristic otherwise).
"""

from opct.ifeval.language import active_detector, detect_language
from opct.ifeval.registry import INSTRUCTIONS, Instruction, InstructionError, check_instruction
from opct.ifeval.scoring import IFEvalResult, evaluate_item, evaluate_response, ifeval_metrics, loose_variants

__all__ = [
    "INSTRUCTIONS",
    "IFEvalResult",
    "Instruction",
    "InstructionError",
    "active_detector",
    "check_instruction",
    "detect_language",
    "evaluate_item",
    "evaluate_response",
    "ifeval_metrics",
    "loose_variants",
]
