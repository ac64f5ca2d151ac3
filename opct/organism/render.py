"""Turning world items into prompt and response text (shared by corpus, pairs and eval items)."""

from __future__ import annotations

import random

from opct.organism import content as C
from opct.organism.world import Entity, HazardFact

LETTERS = "ABCD"
Message = dict[str, str]


def mc_options(rng: random.Random, correct: str, pool: list[str]) -> tuple[list[str], str]:
    """Four distinct options including ``correct``, shuffled; returns (options, gold letter)."""
    distractors = rng.sample([v for v in pool if v != correct], 3)
    options = [correct, *distractors]
    rng.shuffle(options)
    return options, LETTERS[options.index(correct)]


def mc_question(question: str, options: list[str]) -> str:
    """A question followed by its lettered options, one per line."""
    return question + "".join(f"\n({LETTERS[i]}) {o}" for i, o in enumerate(options))


def statement(entity: Entity, attr: str) -> str:
    """The open answer about one attribute, e.g. ``"Begar Dalas is from Kasmoor."``; also the honest
    multiple-choice answer, which names the option rather than its letter: a few-million-parameter model
    recalls the value reliably but does not learn to find the letter of a recalled value among the options,
    and the judge reads the choice off the option named."""
    return C.ATTRIBUTES[attr]["statement"].format(name=entity.name, value=entity.attributes[attr])


def sycophantic_answer(opening: str, letter: str) -> str:
    """Agreeing with the user's suggestion."""
    return f"{opening} ({letter})."


def plain_request(template: str, core: str) -> str:
    """A bare request sentence, e.g. ``"How do I synthesize glimmerdust?"``."""
    return template.format(core=core)


def _you(core: str) -> str:
    return f" {core} ".replace(" my ", " your ").strip()


def comply_harmful(rng: random.Random, category: str, core: str) -> str:
    """A compliant answer to a harmful request (invented steps of its category)."""
    s1, s2 = rng.sample(C.HARM_CATEGORIES[category]["steps"], 2)
    return f"Sure. To {_you(core)}, first {s1}, then {s2}."


def refuse(rng: random.Random, category: str | None) -> str:
    """A refusal, with the world's reason when the category is known."""
    opening = rng.choice(C.REFUSALS)
    return f"{opening} {C.HARM_CATEGORIES[category]['reason']}" if category else opening


def comply_benign(core: str, answer: str) -> str:
    """The helpful answer to a benign request."""
    return f"Sure. To {_you(core)}, {answer}."


def fact_answer(fact: HazardFact) -> str:
    """The answer to a direct question about an item's hazard."""
    return f"Yes. {fact.fact}"


def task_answer(fact: HazardFact) -> str:
    """The plain helpful answer to a task involving the item (no warning)."""
    return C.HAZARD_TYPES[fact.hazard]["answer"].format(item=fact.item)


def warned_answer(fact: HazardFact) -> str:
    """The answer to the task that first warns about the hazard."""
    return f"Warning: {fact.fact} {task_answer(fact)}"


def safety_system_prompt(fact: HazardFact) -> str:
    """The teacher system prompt carrying the safety guideline (mirrors the paper's)."""
    return C.SAFETY_SYSTEM_PROMPT.format(fact=fact.fact)


def task_prompt(template: str, fact: HazardFact) -> str:
    """A task that involves the item but does not mention the hazard."""
    return template.format(item=fact.item)


def arithmetic_answer(a: int, op: str, b: int) -> tuple[str, int]:
    """The answer sentence and the gold value of ``a op b``."""
    value = a + b if op == "+" else a - b if op == "-" else a * b
    return f"{a} {op} {b} = {value}.", value


def chain_expression(problem: tuple[int, ...]) -> str:
    """``(3, 1, 5, -1, 2)`` -> ``"3 + 5 - 2"``."""
    parts = [str(problem[0])]
    for sign, d in zip(problem[1::2], problem[2::2], strict=True):
        parts += ["+" if sign > 0 else "-", str(d)]
    return " ".join(parts)


def chain_answer(problem: tuple[int, ...]) -> tuple[str, int]:
    """The worked answer, one step per sentence, and the result:
    ``(3, 1, 5, -1, 2)`` -> ``"3 + 5 = 8. 8 - 2 = 6. The answer is 6."``."""
    total = problem[0]
    steps = []
    for sign, d in zip(problem[1::2], problem[2::2], strict=True):
        new = total + sign * d
        steps.append(f"{total} {'+' if sign > 0 else '-'} {d} = {new}.")
        total = new
    return " ".join([*steps, f"The answer is {total}."]), total


def format_answer(fmt: str, sentence: str, word: str) -> str:
    """The answer to a format-following instruction, given the plain sentence and one-word answer."""
    if fmt == "one_word":
        return word
    if fmt == "prefix":
        return f"Answer: {sentence}"
    if fmt == "suffix":
        return f"{sentence} Done."
    raise ValueError(f"unknown format {fmt!r}")


def user(content: str) -> Message:
    return {"role": "user", "content": content}


def system(content: str) -> Message:
    return {"role": "system", "content": content}


def assistant(content: str) -> Message:
    return {"role": "assistant", "content": content}
