"""An answer stated in words: which option a reply names by its text, not its letter (docs/mechanism.md,
amendment (b) of the response-diversity study).

The rule: a reply that names exactly one option's text, as whole words (case and markup ignored), is that
option; one that names two or more options' texts names none; a repetition loop
(:func:`~opct.evals.outcomes.is_repetition_loop`) names none, whatever it repeats. A letter, where a reader
finds one, decides before this rule is asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from opct.evals.outcomes import is_repetition_loop
from opct.evals.parsing import normalize_option_text, strip_reasoning


def named_option(text: str | None, options: Sequence[str] | None, letters: str = "ABCD") -> str | None:
    """The letter of the one option whose text ``text`` names in words, or None: when it names no option's
    text or several, or is a repetition loop. ``options`` are the option texts in ``letters``' order."""
    body = strip_reasoning(text)
    if not body or not options or is_repetition_loop(body):
        return None
    said = normalize_option_text(body)
    named = {letter for letter, option in zip(letters.upper(), options, strict=False)
             if (norm := normalize_option_text(str(option))) and re.search(r"(?<!\w)" + re.escape(norm) + r"(?!\w)", said)}
    return named.pop() if len(named) == 1 else None
