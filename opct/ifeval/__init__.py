"""Offline IFEval (Zhou et al. 2023): instruction checkers, strict/loose evaluation and metrics.

Checkers are written from the published instruction definitions; nothing is downloaded at run time
(sentence splitting is rule-based, language detection is langdetect when installed or a built-in
heuristic otherwise).

Known differences from the reference scorer (Google's, vendored by OPCT), chosen to follow the
instruction definitions; each is stated in its checker's docstring:

* sentences: rule-based splitter instead of NLTK Punkt (counts can differ by a few on unusual text);
* ``postscript``: the marker must start a line (the reference accepts it anywhere in a line);
* ``number_bullet_lists``: a bullet needs whitespace after ``*``/``-`` (``*italic*`` lines and
  ``---`` rules are not bullets);
* ``number_paragraphs``: a divider is a line of only ``***``; ``nth_paragraph_first_word`` splits on
  blank lines (whitespace-only lines count) and reads "Summary:" as the word "summary";
* ``no_comma`` also rejects the full-width comma; ``quotation`` also accepts curly double quotes;
* language detection: langdetect when installed (as the reference), else the built-in heuristic.
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
