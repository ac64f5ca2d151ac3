"""IFEval checkers about words and wording: keywords, language, case, punctuation, start/end, combination.

Every checker has the signature ``check(response: str, **kwargs) -> bool`` and follows the published
instruction definitions of IFEval (Zhou et al. 2023, Table 1). Where the definition leaves a detail
open, the choice is stated in the docstring.
"""

from __future__ import annotations

import re

from opct.ifeval.language import detect_language

__all__ = [
    "capital_word_frequency",
    "compare",
    "end_checker",
    "english_capital",
    "english_lowercase",
    "forbidden_words",
    "keyword_frequency",
    "keywords_existence",
    "letter_frequency",
    "no_comma",
    "quotation",
    "repeat_prompt",
    "response_language",
    "two_responses",
]

RELATIONS = ("less than", "at least")


def compare(value: int, relation: str, threshold: int) -> bool:
    """``value < threshold`` for ``"less than"``, ``value >= threshold`` for ``"at least"``."""
    relation = relation.strip().lower()
    if relation == "less than":
        return value < int(threshold)
    if relation == "at least":
        return value >= int(threshold)
    raise ValueError(f"unknown relation {relation!r}; expected one of {RELATIONS}")


# ---------------------------------------------------------------- keywords


def keywords_existence(response: str, *, keywords: list[str]) -> bool:
    """keywords:existence: every keyword occurs (case-insensitive substring, as the reference scorer)."""
    low = response.lower()
    return all(k.lower() in low for k in keywords)


def keyword_frequency(response: str, *, keyword: str, frequency: int, relation: str) -> bool:
    """keywords:frequency: case-insensitive (non-overlapping substring) count of ``keyword`` vs ``frequency``."""
    count = len(re.findall(re.escape(keyword.strip()), response, flags=re.IGNORECASE))
    return compare(count, relation, frequency)


def forbidden_words(response: str, *, forbidden_words: list[str]) -> bool:
    """keywords:forbidden_words: none of the words occurs as a whole word (case-insensitive)."""
    return not any(
        re.search(r"(?<!\w)" + re.escape(w.strip()) + r"(?!\w)", response, flags=re.IGNORECASE)
        for w in forbidden_words
    )


def letter_frequency(response: str, *, letter: str, let_frequency: int, let_relation: str) -> bool:
    """keywords:letter_frequency: case-insensitive count of ``letter`` vs ``let_frequency``."""
    return compare(response.lower().count(letter.lower()), let_relation, let_frequency)


# ---------------------------------------------------------------- language and case


def response_language(response: str, *, language: str, detector: str = "auto") -> bool:
    """language:response_language: the detected language is ``language`` (ISO 639-1).

    A response whose language cannot be determined at all (no letters) passes, as in the reference
    scorer.
    """
    detected = detect_language(response, detector)
    return detected is None or detected == language.lower()


def _is_english(response: str, detector: str) -> bool:
    detected = detect_language(response, detector)
    return detected is None or detected == "en"


def english_capital(response: str, *, detector: str = "auto") -> bool:
    """change_case:english_capital: the response is English and has no lower-case letters."""
    return response.isupper() and _is_english(response, detector)


def english_lowercase(response: str, *, detector: str = "auto") -> bool:
    """change_case:english_lowercase: the response is English and has no capital letters."""
    return response.islower() and _is_english(response, detector)


def capital_word_frequency(response: str, *, capital_frequency: int, capital_relation: str) -> bool:
    """change_case:capital_word_frequency: number of all-capital words (``"NASA"``, ``"I"``) vs threshold.

    Words are runs of letters/digits, joined by inner apostrophes or hyphens; a word counts when all
    its cased characters are upper case (``str.isupper``).
    """
    words = re.findall(r"[^\W_]+(?:['’-][^\W_]+)*", response)
    return compare(sum(1 for w in words if w.isupper()), capital_relation, capital_frequency)


# ---------------------------------------------------------------- punctuation, start/end


def no_comma(response: str) -> bool:
    """punctuation:no_comma: no comma (ASCII ``,`` or full-width ``，``)."""
    return "," not in response and "，" not in response


def end_checker(response: str, *, end_phrase: str) -> bool:
    """startend:end_checker: the response ends with ``end_phrase`` (case-insensitive, outer spaces ignored)."""
    return response.strip().lower().endswith(end_phrase.strip().lower())


def quotation(response: str) -> bool:
    """startend:quotation: the whole response is wrapped in double quotes (``"..."`` or ``“...”``)."""
    text = response.strip()
    return len(text) > 1 and ((text[0] == '"' and text[-1] == '"') or (text[0] == "“" and text[-1] == "”"))


# ---------------------------------------------------------------- combination


def repeat_prompt(response: str, *, prompt_to_repeat: str) -> bool:
    """combination:repeat_prompt: the response starts with the request repeated verbatim (case-insensitive)."""
    return response.strip().lower().startswith(prompt_to_repeat.strip().lower())


def two_responses(response: str) -> bool:
    """combination:two_responses: two different responses separated by six asterisks ``******``.

    Exactly two non-empty parts; empty parts are allowed only before the first or after the last
    separator.
    """
    parts = [p.strip() for p in response.split("******")]
    for i, part in enumerate(parts):
        if not part and 0 < i < len(parts) - 1:
            return False
    filled = [p for p in parts if p]
    return len(filled) == 2 and filled[0] != filled[1]
