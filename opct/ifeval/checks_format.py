"""IFEval checkers about layout: detectable format/content and length constraints.

Same conventions as :mod:`opct.ifeval.checks_content`.
"""

from __future__ import annotations

import json
import re

from opct.ifeval.checks_content import compare
from opct.ifeval.text import count_sentences, count_words, split_paragraphs

__all__ = [
    "CONSTRAINED_RESPONSES",
    "constrained_response",
    "json_format",
    "multiple_sections",
    "nth_paragraph_first_word",
    "number_bullet_lists",
    "number_highlighted_sections",
    "number_paragraphs",
    "number_placeholders",
    "number_sentences",
    "number_words",
    "postscript",
    "title",
]

CONSTRAINED_RESPONSES = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


# ---------------------------------------------------------------- detectable content


def number_placeholders(response: str, *, num_placeholders: int) -> bool:
    """detectable_content:number_placeholders: at least N square-bracket placeholders like ``[address]``."""
    return len(re.findall(r"\[[^\[\]\n]*\]", response)) >= int(num_placeholders)


def postscript(response: str, *, postscript_marker: str) -> bool:
    """detectable_content:postscript: a line starts with the marker (``P.S.``, ``P.P.S``).

    Case-insensitive, optional space between the marker's parts (``P. S.``) and optional markdown
    emphasis before it (``**P.S.**``).
    """
    parts = [re.escape(p) for p in re.split(r"\s*(?<=\.)\s*", postscript_marker.strip()) if p]
    marker = r"\s?".join(parts)
    return re.search(r"(?im)^[ \t*_>]*+" + marker, response) is not None


# ---------------------------------------------------------------- detectable format


def constrained_response(response: str) -> bool:
    """detectable_format:constrained_response: contains one of :data:`CONSTRAINED_RESPONSES`."""
    return any(option in response for option in CONSTRAINED_RESPONSES)


def json_format(response: str) -> bool:
    """detectable_format:json_format: the whole response parses as JSON.

    A surrounding markdown code fence (```` ```json ... ``` ````) is allowed.
    """
    text = response.strip()
    text = re.sub(r"^```[ \t]*(?:json)?[ \t]*\n?", "", text, flags=re.IGNORECASE)
    text = re.sub(r"\n?```\s*$", "", text).strip()
    try:
        json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return False
    return True


def multiple_sections(response: str, *, section_spliter: str, num_sections: int) -> bool:
    """detectable_format:multiple_sections: at least N section markers ``<spliter> <number>``.

    The marker word is matched case-sensitively as given (``SECTION 1``, ``Section 2``).
    """
    pattern = r"(?<!\w)" + re.escape(section_spliter.strip()) + r"\s*\d+"
    return len(re.findall(pattern, response)) >= int(num_sections)


def number_bullet_lists(response: str, *, num_bullets: int) -> bool:
    """detectable_format:number_bullet_lists: exactly N markdown bullets (lines ``* item`` / ``- item``).

    Nested bullets count; numbered items, ``**bold**`` lines and ``---`` rules do not.
    """
    bullets = re.findall(r"(?m)^[ \t]*[*-][ \t]+\S", response)
    return len(bullets) == int(num_bullets)


def number_highlighted_sections(response: str, *, num_highlights: int) -> bool:
    """detectable_format:number_highlighted_sections: at least N non-empty ``*highlighted*`` spans.

    ``**bold**`` spans count too; a span stays on one line.
    """
    spans = re.findall(r"\*\*([^\n*]+)\*\*|\*([^\n*]+)\*", response)
    return sum(1 for a, b in spans if (a or b).strip()) >= int(num_highlights)


def title(response: str) -> bool:
    """detectable_format:title: a title in double angular brackets, ``<<poem of joy>>``."""
    return any(t.strip() for t in re.findall(r"<<([^\n<>]+)>>", response))


# ---------------------------------------------------------------- length constraints


def number_sentences(response: str, *, num_sentences: int, relation: str) -> bool:
    """length_constraints:number_sentences: sentence count (:func:`opct.ifeval.text.split_sentences`) vs N."""
    return compare(count_sentences(response), relation, num_sentences)


def number_words(response: str, *, num_words: int, relation: str) -> bool:
    """length_constraints:number_words: word count (``\\w+`` runs) vs N."""
    return compare(count_words(response), relation, num_words)


def number_paragraphs(response: str, *, num_paragraphs: int) -> bool:
    """length_constraints:number_paragraphs: exactly N paragraphs separated by the markdown divider ``***``.

    A divider is a line holding only three or more asterisks. Empty paragraphs between two dividers
    fail; a divider before the first or after the last paragraph is tolerated.
    """
    parts = [p.strip() for p in re.split(r"(?m)^[ \t]*\*{3,}[ \t]*$", response)]
    for i, part in enumerate(parts):
        if not part and 0 < i < len(parts) - 1:
            return False
    return sum(1 for p in parts if p) == int(num_paragraphs)


def _first_word(paragraph: str) -> str:
    m = re.search(r"[^\W_]+(?:-[^\W_]+)*", paragraph)
    return m.group(0).lower() if m else ""


def nth_paragraph_first_word(
    response: str, *, num_paragraphs: int, nth_paragraph: int, first_word: str
) -> bool:
    """length_constraints:nth_paragraph_first_word: exactly N blank-line-separated paragraphs and the
    ``nth_paragraph``-th (1-based) starts with ``first_word`` (case-insensitive; leading quotes or
    markdown ignored, the word ends at the first non-word character other than an inner hyphen).
    """
    paragraphs = split_paragraphs(response)
    nth = int(nth_paragraph)
    if len(paragraphs) != int(num_paragraphs) or not 1 <= nth <= len(paragraphs):
        return False
    return _first_word(paragraphs[nth - 1]) == first_word.strip().lower()
