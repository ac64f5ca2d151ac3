"""Offline text utilities for IFEval checkers: words, sentences, paragraphs.

No NLTK data is needed. Sentence splitting is a rule-based stand-in for Punkt (which the usual IFEval
scorer loads): a sentence ends at ``.``, ``!``, ``?`` or ``…`` (optionally followed by closing quotes
or brackets) followed by whitespace or the end of the text, except

* after a known abbreviation (``Mr.``, ``e.g.``, ``etc.`` when a lower-case word follows, ...), a
  single-letter initial (``J. K.``) or a dotted acronym (``U.S.``);
* after a list number at the start of a line (``1. First``);
* when the next word starts in lower case (``approx. five``).

Like Punkt, line breaks alone do not end a sentence.
"""

from __future__ import annotations

import re

__all__ = ["count_sentences", "count_words", "split_paragraphs", "split_sentences", "word_tokens"]

_ABBREVIATIONS = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "e.g", "i.e", "cf", "al", "inc", "ltd", "co", "corp", "dept", "est", "approx", "no", "nos", "vol", "vols", "fig", "figs", "eq", "eqs", "ch", "sec", "p", "pp", "ed", "eds", "rev", "gen", "col", "lt", "sgt", "capt", "cmdr", "gov", "sen", "rep", "pres", "ph.d", "m.d", "b.a", "m.a", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mon", "tue", "wed", "thu", "fri", "sat", "sun", "u.s", "u.k", "u.n", "a.m", "p.m", "ave", "blvd", "rd", "hwy"]
)
# The lookbehind makes a match start only at the beginning of a punctuation run (linear time).
_END = re.compile(r"(?<![.!?…])[.!?…]++[\"'”’)\]»]*+(?=\s|$)")


def word_tokens(text: str) -> list[str]:
    """Word tokens: maximal runs of word characters (``\\w+``), as IFEval's word counter uses."""
    return re.findall(r"\w+", text)


def count_words(text: str) -> int:
    """Number of :func:`word_tokens`."""
    return len(word_tokens(text))


def _is_boundary(text: str, start: int, m: re.Match[str]) -> bool:
    punct = m.group(0)
    after = text[m.end():].lstrip()
    if after and after[0].islower():
        return False
    if not punct.startswith(".") or punct.rstrip("\"'”’)]»") not in (".",):
        return True  # "!", "?", "...", "?!" always end a sentence unless lower case follows
    window = text[max(start, m.start() - 40) : m.start()]  # the token before the period is short
    if not window or window[-1].isspace():
        return True
    token = window.split()[-1]
    word = token.lstrip("(\"'“‘[*_").lower()
    if word in _ABBREVIATIONS or re.fullmatch(r"[^\W\d_]", word) or re.fullmatch(r"(?:[^\W\d_]\.)+[^\W\d_]", word):
        return False
    if not re.fullmatch(r"\d{1,3}", word):
        return True
    # "1." opening a line is a list marker, not a sentence end.
    token_start = m.start() - len(token)
    line_start = text.rfind("\n", start, token_start) + 1
    return bool(text[max(line_start, start) : token_start].strip())


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with the rules in the module docstring; empty pieces are dropped."""
    sentences = []
    start = 0
    for m in _END.finditer(text):
        if _is_boundary(text, start, m):
            piece = text[start : m.end()].strip()
            if piece:
                sentences.append(piece)
            start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def count_sentences(text: str) -> int:
    """Number of sentences found by :func:`split_sentences`."""
    return len(split_sentences(text))


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs separated by one or more blank lines (``\\n\\n``; whitespace-only lines count as blank).

    Returns the stripped, non-empty paragraphs.
    """
    return [p.strip() for p in re.split(r"\n[^\S\n]*\n", text) if p.strip()]
