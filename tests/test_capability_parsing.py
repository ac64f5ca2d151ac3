"""Answer parsers: multiple-choice letters and math final answers / equivalence."""

from __future__ import annotations

import pytest

from opct.evals.parsing import (
    MC_PATTERNS,
    extract_boxed,
    extract_choice,
    extract_choice_detailed,
    extract_math_answer,
    grade_math,
    math_equal,
    normalize_math_string,
    strip_reasoning,
)

# (response, expected letter, expected pattern name)
MC_CASES = [
    # 1. answer_line
    ("Reasoning...\nAnswer: B", "B", "answer_line"),
    ("answer: b", "B", "answer_line"),
    ("**Answer:** (C)", "C", "answer_line"),
    ("Final answer: $\\boxed{D}$", "D", "answer_line"),
    ("Answer: not A but C", "C", "answer_line"),
    ("Answer: A\nWait, that is wrong.\nAnswer: D", "D", "answer_line"),
    ("Option A is tempting and B fails the units test.\nAnswer: C", "C", "answer_line"),
    ("Answer: C because the gap is larger.", "C", "answer_line"),
    ("ANSWER: (a)", "A", "answer_line"),
    # 2. answer_phrase
    ("The answer is (B).", "B", "answer_phrase"),
    ("So the answer is not A but C.", "C", "answer_phrase"),
    ("It's not A; the answer is B", "B", "answer_phrase"),
    ("The answer is C, not A.", "C", "answer_phrase"),
    ("the correct option is c.", "C", "answer_phrase"),
    ("I choose D because it matches.", "D", "answer_phrase"),
    ("Hence the best choice would be option B", "B", "answer_phrase"),
    # 3. boxed
    ("Therefore \\boxed{B}", "B", "boxed"),
    ("Therefore $\\boxed{\\text{(C)}}$", "C", "boxed"),
    # 4. bold on the last line
    ("Both B and C look plausible, but energy rules out B.\n\n**C**", "C", "bold_last_line"),
    ("Working...\nFinal: **(D)**", "D", "bold_last_line"),
    # 5. leading letter on the last line
    ("Checking each option...\nB) 10^-11 eV", "B", "leading_letter_last_line"),
    ("Let me think.\n(c)", "C", "leading_letter_last_line"),
    ("D. It is the only stable isomer.", "D", "leading_letter_last_line"),
    # 6. lone letter
    ("b", "B", "leading_letter_last_line"),
    ("  (C).  ", "C", "leading_letter_last_line"),
    ("**A**", "A", "bold_last_line"),
    # reasoning blocks are ignored
    ("<think>Answer: A</think>\nAnswer: B", "B", "answer_line"),
]

MC_UNPARSABLE = [
    "",
    None,
    "I don't know.",
    "The answer is a bit unclear to me.",
    "Answer: A mixture of both effects",
    "Let's check A) first and B) second. Neither works.",
    "**A)** is wrong and **B)** is wrong too.\nSo I cannot decide.",
    "Answer: E",  # not a valid letter for 4 options
    "<think>Answer: A ... still thinking",  # truncated reasoning
    "Options C and D both look right to me",
]


@pytest.mark.parametrize(("response", "letter", "pattern"), MC_CASES)
def test_mc_patterns(response: str, letter: str, pattern: str) -> None:
    assert extract_choice_detailed(response) == (letter, pattern)
    assert pattern in MC_PATTERNS


@pytest.mark.parametrize("response", MC_UNPARSABLE)
def test_mc_unparsable_is_none(response: str | None) -> None:
    assert extract_choice(response) is None


def test_mc_lone_letter_pattern() -> None:
    assert extract_choice_detailed("... (b) ...") == ("B", "lone_letter")


def test_mc_i_would_say_pattern() -> None:
    # "The answer is a ..." is not an answer; the parenthesised letter after "I'd say" is.
    assert extract_choice_detailed("The answer is a tricky one. I'd say (C) is right.") == ("C", "i_would_say")
    assert extract_choice("I would say (a), then again I would say (d).") == "D"
    assert extract_choice("I'd say (B) at first, but Answer: C") == "C"  # every other pattern comes first
    assert extract_choice("I'd say (E)") is None  # not a valid letter for 4 options
    assert extract_choice("I'd say C is wrong") is None  # the letter must be in parentheses
    assert "i_would_say" in MC_PATTERNS


def test_mc_letters_argument() -> None:
    assert extract_choice("Answer: E", letters="ABCDE") == "E"
    assert extract_choice("Answer: J", letters="ABCDEFGHIJ") == "J"
    assert extract_choice("Answer: E", letters="ABCD") is None


def test_mc_option_text() -> None:
    options = ["10^-8 eV", "10^-11 eV", "10^-9 eV", "10^-4 eV"]
    assert extract_choice_detailed("The gap must exceed both widths.\nAnswer: 10^-4 eV", options) == (
        "D",
        "option_text",
    )
    chem = ["Oxygen", "Carbon dioxide", "Water", "Carbon"]
    assert extract_choice("carbon dioxide.", chem) == "B"  # exact option beats the contained "carbon"
    assert extract_choice("It is carbon", chem) == "D"
    assert extract_choice("Either oxygen or water", chem) is None  # two options named
    assert extract_choice("Answer: 10^-4 eV") is None  # no options given: nothing guessed


def test_strip_reasoning() -> None:
    assert strip_reasoning("<think>x</think>\n y ") == "y"
    assert strip_reasoning("<think>never closed") == ""
    assert strip_reasoning("plain") == "plain"
    assert strip_reasoning(None) == ""


# ---------------------------------------------------------------- math


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x \\boxed{\\frac{a}{\\sqrt{b}}} y", "\\frac{a}{\\sqrt{b}}"),
        ("\\boxed{1} then \\boxed{\\{1,2\\}}", "\\{1,2\\}"),
        ("\\fbox{42}", "42"),
        ("\\boxed 7", "7"),
        ("\\boxed{unbalanced", None),
        ("no box", None),
    ],
)
def test_extract_boxed(text: str, expected: str | None) -> None:
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("Work.\nAnswer: \\frac{1}{2}", "\\frac{1}{2}"),
        ("Answer: $[2, 5)$.", "[2, 5)"),
        ("**Answer:** $x = 2$", "x = 2"),
        ("Answer: **3**", "3"),
        ("Answer: 3.", "3"),
        ("Answer: $\\boxed{7}$", "7"),
        ("Answer:\n$$x=5$$", "x=5"),
        ("Steps with Answer: 1 in the middle.\nFinal Answer: 2", "2"),
        ("so \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("The final answer is $\\frac{14}{3}$.", "\\frac{14}{3}"),
        ("<think>Answer: 1</think>Answer: 9", "9"),
        ("I could not solve it.", None),
        ("", None),
    ],
)
def test_extract_math_answer(response: str, expected: str | None) -> None:
    assert extract_math_answer(response) == expected


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("0.5", "\\frac{1}{2}"),
        ("\\dfrac{1}{2}", "\\frac12"),
        ("1/2", "\\frac{1}{2}"),
        ("[2, 5)", "[2,5)"),
        ("(3, \\pi/2)", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("-2, 1", "1,-2"),
        ("x \\in [-2,7]", "[-2,7]"),
        ("145", "145^\\circ"),
        ("10", "10\\%"),
        ("18.9", "\\$18.90"),
        ("32348", "\\$32,\\!348"),
        ("Evelyn", "\\text{Evelyn}"),
        ("\\text{(C)}", "\\text{(C)}"),
        ("11\\sqrt{2}", "11\\sqrt2"),
        ("6-5i", "6 - 5i"),
        ("3 R^2", "3R^2"),
    ],
)
def test_math_equal_true(pred: str, gold: str) -> None:
    assert math_equal(pred, gold)


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("2", "3"),
        ("4.6667", "\\frac{14}{3}"),  # rounded decimal of a non-terminating fraction is not equal
        ("[2, 5]", "[2,5)"),
        ("\\text{Bob}", "\\text{Evelyn}"),
        (None, "1"),
        ("", "1"),
        ("\\frac{1}{", "\\frac{1}{2}"),  # malformed LaTeX: no crash, not equal
    ],
)
def test_math_equal_false(pred: str | None, gold: str) -> None:
    assert not math_equal(pred, gold)


def test_normalize_math_string() -> None:
    assert normalize_math_string("\\left( 3, \\dfrac{\\pi}{2} \\right)") == "(3,\\frac{\\pi}{2})"
    assert normalize_math_string("x = \\text{ Evelyn }") == "evelyn"
    assert normalize_math_string("90^\\circ") == "90"


def test_grade_math() -> None:
    assert grade_math("Long work.\nAnswer: 0.5", "\\frac{1}{2}") == {"pred": "0.5", "correct": True}
    assert grade_math("no final line, but 1/2 appears", "\\frac{1}{2}") == {"pred": None, "correct": False}
    lenient = grade_math("no final line, result $\\frac{1}{2}$", "\\frac{1}{2}", search_whole_response=True)
    assert lenient["correct"] is True and lenient["pred"] is None


def test_math_equal_in_thread() -> None:
    """math_verify's SIGALRM timeout cannot be used off the main thread; the wrapper must still work."""
    import threading

    out: list[bool] = []
    t = threading.Thread(target=lambda: out.append(math_equal("0.5", "\\frac{1}{2}")))
    t.start()
    t.join()
    assert out == [True]


@pytest.mark.parametrize(
    "text",
    [
        "Answer:" + " " * 20000 + "!",
        "the answer is " + "*" * 20000 + "?",
        "Answer: not " * 3000,
        "\\boxed{" * 20000,
        "(" * 20000,
        "** " * 10000,
    ],
    ids=["spaces", "stars", "negations", "open-boxes", "parens", "bold"],
)
@pytest.mark.timeout(60)
def test_parsers_never_hang_on_degenerate_output(text: str) -> None:
    """Regression: overlapping regex quantifiers once made "Answer:" + many spaces take minutes. A hang
    guard, not a speed target (a linear parser takes milliseconds; the catastrophic one took minutes):
    the timeout fails the test, whatever the machine's load."""
    extract_choice(text, ["a b", "c"])
    extract_math_answer(text)
