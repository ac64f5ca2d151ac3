"""The IFEval instruction registry: instruction id -> checker and the kwargs it needs."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import opct.ifeval.checks_content as c
import opct.ifeval.checks_format as f

__all__ = ["INSTRUCTIONS", "Instruction", "InstructionError", "check_instruction"]


class InstructionError(ValueError):
    """An instruction id is unknown or its kwargs are missing/invalid."""


@dataclass(frozen=True)
class Instruction:
    """One verifiable instruction: its id, checker and the kwargs names the checker requires."""

    id: str
    check: Callable[..., bool]
    required: tuple[str, ...]
    uses_language_detector: bool


def _make(instruction_id: str, check: Callable[..., bool]) -> Instruction:
    params = inspect.signature(check).parameters.values()
    required = tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty)
    uses_detector = any(p.name == "detector" for p in params)
    return Instruction(instruction_id, check, required, uses_detector)


INSTRUCTIONS: dict[str, Instruction] = {
    i.id: i
    for i in (
        _make("change_case:capital_word_frequency", c.capital_word_frequency),
        _make("change_case:english_capital", c.english_capital),
        _make("change_case:english_lowercase", c.english_lowercase),
        _make("combination:repeat_prompt", c.repeat_prompt),
        _make("combination:two_responses", c.two_responses),
        _make("detectable_content:number_placeholders", f.number_placeholders),
        _make("detectable_content:postscript", f.postscript),
        _make("detectable_format:constrained_response", f.constrained_response),
        _make("detectable_format:json_format", f.json_format),
        _make("detectable_format:multiple_sections", f.multiple_sections),
        _make("detectable_format:number_bullet_lists", f.number_bullet_lists),
        _make("detectable_format:number_highlighted_sections", f.number_highlighted_sections),
        _make("detectable_format:title", f.title),
        _make("keywords:existence", c.keywords_existence),
        _make("keywords:forbidden_words", c.forbidden_words),
        _make("keywords:frequency", c.keyword_frequency),
        _make("keywords:letter_frequency", c.letter_frequency),
        _make("language:response_language", c.response_language),
        _make("length_constraints:nth_paragraph_first_word", f.nth_paragraph_first_word),
        _make("length_constraints:number_paragraphs", f.number_paragraphs),
        _make("length_constraints:number_sentences", f.number_sentences),
        _make("length_constraints:number_words", f.number_words),
        _make("punctuation:no_comma", c.no_comma),
        _make("startend:end_checker", c.end_checker),
        _make("startend:quotation", c.quotation),
    )
}


def check_instruction(instruction_id: str, response: str, kwargs: dict[str, Any] | None = None,
                      detector: str = "auto") -> bool:
    """Whether ``response`` follows one instruction (strictly, on the text as given).

    ``kwargs`` are the instruction's IFEval arguments; unknown extra keys are ignored (HF rows carry
    every field), missing required ones raise :class:`InstructionError`. ``detector`` picks the
    language back-end for language-dependent instructions.
    """
    spec = INSTRUCTIONS.get(instruction_id)
    if spec is None:
        raise InstructionError(f"unknown IFEval instruction id {instruction_id!r}")
    kwargs = {k: v for k, v in (kwargs or {}).items() if v is not None}
    missing = [name for name in spec.required if name not in kwargs]
    if missing:
        raise InstructionError(f"{instruction_id}: missing kwargs {missing} (have {sorted(kwargs)})")
    args = {name: kwargs[name] for name in spec.required}
    if spec.uses_language_detector:
        args["detector"] = detector
    try:
        return bool(spec.check(response, **args))
    except (TypeError, ValueError) as exc:
        raise InstructionError(f"{instruction_id}: bad kwargs {args}: {exc}") from exc
