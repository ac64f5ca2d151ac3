"""Answer parsers for capability benchmarks: multiple-choice letters and math final answers.

Multiple choice (:func:`extract_choice`). Patterns are tried in this order; the first pattern that
matches decides, and within a pattern the *last* match in the response wins (models restate and
correct themselves; the final statement counts):

1. ``answer_line``: an explicit answer marker, ``"Answer: B"``, ``"**Answer:** (b)"``,
   ``"Final answer: $\\boxed{C}$"``, ``"Answer: not A but C"``.
2. ``answer_phrase``: a sentence, ``"the answer is (B)"``, ``"the correct option is C"``,
   ``"the answer is not A but C"``, ``"I choose D"``.
3. ``boxed``: ``"\\boxed{B}"``, ``"\\boxed{\\text{(B)}}"``.
4. ``bold_last_line``: a bold letter on the last non-empty line, ``"**B**"``, ``"**(C)**"``.
5. ``leading_letter_last_line``: the last non-empty line starts with a lettered option,
   ``"B) 10 eV"``, ``"(c)"``, ``"D."``.
6. ``lone_letter``: the only letter in the whole response is that one, amid punctuation/markdown
   (``"... (b) ..."``; plain ``"b"`` or ``"(C)."`` are already caught by pattern 5).
7. ``option_text``: only when option texts are given: the last non-empty line (after any
   ``"Answer:"``) contains exactly one option's text as whole words.
8. ``i_would_say``: a parenthesised letter after "I'd say" / "I would say", ``"I'd say (C) is
   right"`` (last, so it only reads replies that no other pattern reads).

A letter must be one of ``letters`` (case-insensitive). A lower-case letter or "A" followed by more
words (``"the answer is a bit unclear"``, ``"Answer: A mixture"``) is not taken as an answer. When no
pattern matches, the result is ``None``: nothing is guessed.

Math (:func:`extract_math_answer`), in order: the last ``"Answer: ..."`` (the OPCT prompt's required
last line; when it holds a ``\\boxed{}`` the box content is used), the last ``\\boxed{...}`` /
``\\fbox{...}`` (nested braces handled), then ``"the final answer is ..."``. Equivalence
(:func:`math_equal`) uses ``math_verify.parse`` + ``verify`` with a timeout, then a normalised-string
comparison as fallback.

Both extractors first drop reasoning blocks (``<think>...</think>``) with :func:`strip_reasoning`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

from opct.errors import require_extra

__all__ = [
    "MC_PATTERNS",
    "extract_boxed",
    "extract_choice",
    "extract_choice_detailed",
    "extract_math_answer",
    "grade_math",
    "math_equal",
    "normalize_math_string",
    "normalize_option_text",
    "strip_reasoning",
]


def strip_reasoning(text: str | None) -> str:
    """Remove ``<think>...</think>`` reasoning; keep what follows the last ``</think>``.

    A ``<think>`` that is never closed (the model ran out of tokens while thinking) leaves nothing.
    """
    if not text:
        return ""
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    elif re.match(r"\s*<think>", text):
        return ""
    return text.strip()


# --------------------------------------------------------------------------- multiple choice

MC_PATTERNS = (
    "answer_line",
    "answer_phrase",
    "boxed",
    "bold_last_line",
    "leading_letter_last_line",
    "lone_letter",
    "option_text",
    "i_would_say",
)

# Possessive quantifiers (*+, ++) keep these linear on degenerate outputs (long runs of spaces or stars).
_DECOR = r"[\s*_$]*+"
_NEG = r"(?:not\s++(?:option\s++)?\(?[A-Za-z]\)?\s*+(?:,\s*+)?(?:but|;)\s*+(?:rather\s++)?)?"
_LETTER = r"(?:\\boxed\{|\\text(?:bf)?\{)*+[\s(]*+([A-Za-z])(?:\s*+\))?(?![A-Za-z0-9_])"
_OPTION_WORD = r"(?:(?:option|choice)\s++)?"
_ANSWER_LINE = re.compile(r"(?i)\banswer[\s*_]*+[:：]" + _DECOR + _NEG + _OPTION_WORD + _LETTER)
_ANSWER_PHRASE = re.compile(
    r"(?i)(?:\b(?:answer|option|choice)\s++(?:is|would\s++be|should\s++be|must\s++be|=)[\s:]*+"
    r"|\bI\s++(?:would\s++)?(?:choose|pick|select|go\s++with)\s++)"
    + _DECOR + _NEG + _OPTION_WORD + _LETTER
)
_BOXED_LETTER = re.compile(r"\\boxed\{\s*+(?:\\text(?:bf)?\{)?\s*+\(?([A-Za-z])\)?\s*+\}?\s*+\}")
_BOLD_LETTER = re.compile(r"\*\*\s*+\(?([A-Za-z])\)?\s*+[.:)]?\s*+\*\*")
_LEADING_LETTER = re.compile(r"^[\s*_#>-]*+\(?([A-Za-z])(?:\)|[.:](?=\s|$)|\s*+$)")
_LONE_LETTER = re.compile(r"^[\W_]*+([A-Za-z])[\W_]*+$")
_I_WOULD_SAY = re.compile(r"(?i)\bI(?:'d|\u2019d|\s++would)\s++say\s++\(\s*+([A-Za-z])\s*+\)")
_FOLLOW_OK = re.compile(r"\s*(?:[).:\]*}$,;!?]|$)")
_FOLLOW_CONNECTIVE = re.compile(r"\s+(?:because|since|as|is|was|[-–—(])(?=\W)", re.IGNORECASE)


def _letter_ok(text: str, m: re.Match[str], letters: str) -> str | None:
    """The matched letter, upper-cased, if it is a valid answer in context, else None."""
    raw = m.group(1)
    letter = raw.upper()
    if letter not in letters:
        return None
    rest = text[m.end(1):]
    if m.group(0).rstrip().endswith(")") or _FOLLOW_OK.match(rest) or _FOLLOW_CONNECTIVE.match(rest):
        return letter
    # Followed by more words: only an upper-case letter other than the article "A" is accepted.
    if raw.isupper() and raw != "A":
        return letter
    return None


def _last_valid(pattern: re.Pattern[str], text: str, letters: str) -> str | None:
    found = None
    for m in pattern.finditer(text):
        letter = _letter_ok(text, m, letters)
        if letter is not None:
            found = letter
    return found


def normalize_option_text(text: str) -> str:
    """An option's or an answer's text for whole-word matching: lower case, markup and punctuation as spaces."""
    text = re.sub(r"[$*_`\\]", " ", text.lower())
    text = re.sub(r"[^\w\s.+-/^=()]", " ", text)
    return re.sub(r"\s+", " ", text).strip().rstrip(".")


def _match_option_text(line: str, options: Sequence[str], letters: str) -> str | None:
    marker = list(re.finditer(r"(?i)\banswer[\s*_]*+[:：]", line))
    if marker:
        line = line[marker[-1].end():]
    segment = normalize_option_text(line)
    if not segment:
        return None
    hits = []
    for letter, option in zip(letters, options, strict=False):
        norm = normalize_option_text(str(option))
        if not norm:
            continue
        if norm == segment:
            return letter
        if re.search(r"(?<!\w)" + re.escape(norm) + r"(?!\w)", segment):
            hits.append(letter)
    return hits[0] if len(hits) == 1 else None


def extract_choice_detailed(
    text: str | None, options: Sequence[str] | None = None, letters: str = "ABCD"
) -> tuple[str | None, str | None]:
    """Like :func:`extract_choice` but also return the name of the pattern that decided (or None)."""
    letters = letters.upper()
    body = strip_reasoning(text)
    if not body:
        return None, None
    lines = [line for line in body.splitlines() if line.strip()]
    last_line = lines[-1].strip() if lines else ""
    for name, pattern, target in (
        ("answer_line", _ANSWER_LINE, body),
        ("answer_phrase", _ANSWER_PHRASE, body),
        ("boxed", _BOXED_LETTER, body),
        ("bold_last_line", _BOLD_LETTER, last_line),
    ):
        letter = _last_valid(pattern, target, letters)
        if letter:
            return letter, name
    m = _LEADING_LETTER.match(last_line)
    if m and m.group(1).upper() in letters:
        return m.group(1).upper(), "leading_letter_last_line"
    m = _LONE_LETTER.match(body)
    if m and m.group(1).upper() in letters:
        return m.group(1).upper(), "lone_letter"
    if options:
        letter = _match_option_text(last_line, options, letters)
        if letter:
            return letter, "option_text"
    letter = _last_valid(_I_WOULD_SAY, body, letters)
    if letter:
        return letter, "i_would_say"
    return None, None


def extract_choice(text: str | None, options: Sequence[str] | None = None, letters: str = "ABCD") -> str | None:
    """Extract the chosen option letter from a response, or None when no documented pattern matches.

    ``options`` (option texts in letter order) enables the last-resort option-text match; ``letters``
    lists the valid letters (``"ABCD"``; ``"ABCDEFGHIJ"`` for 10-way questions). See the module
    docstring for the patterns and their order.
    """
    return extract_choice_detailed(text, options, letters)[0]


# --------------------------------------------------------------------------- math answers


def _closing_braces(text: str) -> dict[int, int]:
    """Map each unescaped ``{`` index to its matching ``}`` index (one linear pass)."""
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for j, ch in enumerate(text):
        if ch in "{}" and j > 0 and text[j - 1] == "\\":
            continue
        if ch == "{":
            stack.append(j)
        elif ch == "}" and stack:
            pairs[stack.pop()] = j
    return pairs


def extract_boxed(text: str, commands: Sequence[str] = ("boxed", "fbox")) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced nested braces.

    Also accepts the brace-less ``\\boxed 5`` form. An unclosed box is skipped in favour of an
    earlier complete one; None when there is none.
    """
    pattern = re.compile(r"\\(?:" + "|".join(commands) + r")\b")
    starts = [m.end() for m in pattern.finditer(text)]
    pairs: dict[int, int] | None = None
    for start in reversed(starts):
        rest = text[start:]
        brace = start + len(rest) - len(rest.lstrip(" "))
        if brace < len(text) and text[brace] == "{":
            pairs = pairs if pairs is not None else _closing_braces(text)
            if brace in pairs:
                return text[brace + 1 : pairs[brace]].strip()
            continue  # unclosed: try an earlier box
        m = re.match(r" +([^\s$]+)", rest)
        if m:
            return m.group(1)
    return None


_MATH_ANSWER = re.compile(r"(?i)(?<![a-z])answer[\s*_]*+[:：]")
_ANSWER_IS = re.compile(r"(?i)\banswer\s++is[\s:]*+")


def _clean_math_answer(ans: str) -> str:
    ans = ans.strip()
    boxed = extract_boxed(ans)
    if boxed is not None:
        return boxed
    ans = re.sub(r"[.。]\s*$", "", ans.strip("*_ ")).strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if ans.startswith(left) and ans.endswith(right) and len(ans) > len(left) + len(right) - 1:
            inner = ans[len(left) : len(ans) - len(right)].strip()
            if left != "$" or "$" not in inner:
                ans = inner
                break
    ans = re.sub(r"[.。]\s*$", "", ans).strip()
    if ans.endswith("$") and ans.count("$") % 2 == 1:
        ans = ans[:-1].strip()
    return ans.strip("*_ ").strip()


def extract_math_answer(text: str | None) -> str | None:
    """Extract the final answer of a math response (see the module docstring); None if absent.

    ``"Answer:"`` followed by nothing on its line takes the next non-empty line.
    """
    body = strip_reasoning(text)
    if not body:
        return None
    matches = list(_MATH_ANSWER.finditer(body))
    if matches:
        rest = body[matches[-1].end():]
        lines = rest.split("\n")
        candidate = lines[0].strip()
        if not candidate.strip("*_$ "):
            candidate = next((line.strip() for line in lines[1:] if line.strip()), "")
        cleaned = _clean_math_answer(candidate)
        if cleaned:
            return cleaned
    boxed = extract_boxed(body)
    if boxed:
        return boxed
    matches = list(_ANSWER_IS.finditer(body))
    if matches:
        rest = body[matches[-1].end():].split("\n")[0]
        cleaned = _clean_math_answer(rest)
        if cleaned:
            return cleaned
    return None


_TEXT_COMMANDS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")


def normalize_math_string(ans: str) -> str:
    """A light canonical form of a LaTeX answer for string comparison (the fallback of :func:`math_equal`).

    Drops spacing commands, ``\\left``/``\\right``, ``$``, degree signs, ``\\%``, text wrappers and a
    leading ``x =``; maps ``\\dfrac``/``\\tfrac`` to ``\\frac``; removes whitespace and lower-cases.
    """
    s = ans.strip()
    s = re.sub(r"\\[,;:! ]", "", s)
    s = s.replace("\\left", "").replace("\\right", "").replace("\\displaystyle", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = re.sub(r"\^\s*\{?\\circ\}?|°", "", s)
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "").replace("$", "")
    for _ in range(3):
        s = _TEXT_COMMANDS.sub(r"\1", s)
    s = re.sub(r"^\s*[a-zA-Z]\s*=\s*(?=\S)", "", s)
    s = re.sub(r"\s+", "", s).rstrip(".").lower()
    return s


def _verify_with_math_verify(gold: str, pred: str, timeout_s: int) -> bool:
    require_extra("math_verify", "data", "grading MATH answers")
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    # math_verify's timeouts use SIGALRM, which only works in the main thread.
    timeout = timeout_s if threading.current_thread() is threading.main_thread() else None

    def _parse(s: str) -> list:
        s = s.replace("\\$", "").replace("\\!", "").strip()  # currency signs and thin negative spaces
        wrapped = s if "$" in s or "\\(" in s or "\\[" in s else f"${s}$"
        out = parse(wrapped, parsing_timeout=timeout)  # type: ignore[arg-type]
        return out or parse(s, parsing_timeout=timeout)  # type: ignore[arg-type]

    try:
        g, p = _parse(gold), _parse(pred)
        if not g or not p:
            return False
        return bool(verify(g, p, timeout_seconds=timeout))
    except (Exception, TimeoutException):
        return False


def math_equal(pred: str | None, gold: str, timeout_s: int = 5) -> bool:
    """Whether an extracted answer equals the gold answer.

    True if ``math_verify`` (``parse`` both, then ``verify``) says so, or if both normalise to the same
    string (:func:`normalize_math_string`). Never raises; parsing/verification is bounded by
    ``timeout_s`` seconds each when called from the main thread (math_verify uses SIGALRM; in other
    threads it runs unbounded, so prefer worker processes for untrusted outputs).
    """
    if pred is None or not str(pred).strip():
        return False
    pred, gold = str(pred).strip(), str(gold).strip()
    if normalize_math_string(pred) == normalize_math_string(gold):
        return True
    return _verify_with_math_verify(gold, pred, timeout_s)


def grade_math(response: str | None, gold: str, *, search_whole_response: bool = False,
               timeout_s: int = 5) -> dict[str, object]:
    """Extract and grade one MATH response: ``{"pred": str | None, "correct": bool}``.

    With ``search_whole_response`` (the OPCT reference scorer's behaviour), a response with no
    extractable answer is handed whole to ``math_verify``, which then looks for the last expression
    itself; by default such a response is simply wrong (``pred`` None).
    """
    pred = extract_math_answer(response)
    if pred is not None:
        return {"pred": pred, "correct": math_equal(pred, gold, timeout_s)}
    body = strip_reasoning(response)
    if search_whole_response and body:
        return {"pred": None, "correct": _verify_with_math_verify(gold, body, timeout_s)}
    return {"pred": None, "correct": False}
