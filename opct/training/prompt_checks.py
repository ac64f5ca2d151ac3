"""Checks of every training and validation prompt against the model, before any weights load.

:func:`check_prompts` renders each ``prompt`` and ``teacher_prompt`` exactly as training will (the
model's chat template, its ``chat_template_kwargs`` and system prompt) and refuses, naming the file,
the line, the field and the length:

* a prompt longer than ``data.max_prompt_tokens`` (when set);
* a prompt that leaves no room for the tokens generated after it: its length plus the most new tokens
  the run generates after one prompt (the method's generation settings, e.g. ``opct.sampling`` or
  ``bct.targets``; ``validation.samples``/``answers`` for validation pairs) must fit the model's
  positions (``max_position_embeddings``/``n_positions`` in its config; no limit for a model without
  one). Past them a model fails late and badly: GPT-2 raises IndexError, a 100k-token prompt runs
  out of memory. ``data.too_long: drop`` drops such pairs instead, with one warning counting them;
* a prompt holding the text of one of the tokenizer's special tokens (``<|im_start|>``,
  ``<|eot_id|>``, ``<|endoftext|>``...). A Hugging Face tokenizer turns that text into the control
  token itself, so the model would train on a forged chat structure (an extra turn, an early end of
  text) that the pair file does not show: the prompt no longer means what its author wrote, and it is
  a prompt-injection path into the training data. Such pairs are therefore refused rather than
  warned about; data that means it (chat-injection attacks written for this very tokenizer) sets
  ``data.allow_special_tokens: true`` and gets one warning counting them.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from opct.config import GenerationConfig, ModelConfig, RunConfig
from opct.models import PromptRenderer, resolve_model_path
from opct.pairs import ConsistencyPair, PairFileError, PairProblem

SIDES = ("prompt", "teacher_prompt")
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


class TrainingDataWarning(UserWarning):
    """Training pairs were dropped or accepted with a caveat (too long, special-token text)."""


def model_positions(spec: ModelConfig) -> tuple[int, str] | None:
    """The number of positions the model attends over and the config key that says so, read from its
    config alone (no weights); None for a model without a limit or whose config cannot be read here (its
    loading then reports why)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(
            resolve_model_path(spec.name_or_path), revision=spec.revision, trust_remote_code=spec.trust_remote_code
        )
    except (OSError, ValueError):
        return None
    for key in _POSITION_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value, key
    return None


def generated_tokens(sections: dict[str, object]) -> tuple[int, str]:
    """The most new tokens generated after one prompt among the :class:`GenerationConfig` fields of
    ``sections`` (name -> settings object), and the dotted key that sets it."""
    best = (0, "")
    for prefix, section in sections.items():
        for name in type(section).model_fields if section is not None else ():
            value = getattr(section, name)
            if isinstance(value, GenerationConfig) and value.max_new_tokens > best[0]:
                best = (value.max_new_tokens, f"{prefix}.{name}.max_new_tokens")
    return best


@dataclass(frozen=True)
class Budget:
    """What one rendered prompt must fit: ``data.max_prompt_tokens``, and the positions less what is generated."""

    max_prompt: int | None
    positions: tuple[int, str] | None
    generated: tuple[int, str]

    def problem(self, tokens: int) -> str | None:
        """Why a prompt of ``tokens`` tokens does not fit, or None."""
        if self.max_prompt is not None and tokens > self.max_prompt:
            return (f"{tokens} tokens as rendered with the chat template, more than data.max_prompt_tokens="
                    f"{self.max_prompt}; shorten it, or drop such pairs with data.too_long: drop")
        if self.positions is not None and tokens + self.generated[0] > self.positions[0]:
            limit, key = self.positions
            new, new_key = self.generated
            return (f"{tokens} tokens as rendered with the chat template + {new} new tokens ({new_key}) = "
                    f"{tokens + new}, more than the model's {limit} positions ({key} in its config); shorten it, "
                    f"lower {new_key}, or drop such pairs with data.too_long: drop")
        return None


def special_token_pattern(tokenizer: PreTrainedTokenizerBase) -> re.Pattern[str] | None:
    """A pattern matching the text of any of the tokenizer's special tokens, or None if it has none."""
    specials = set(getattr(tokenizer, "all_special_tokens", []) or [])
    specials |= {t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if getattr(t, "special", False)}
    specials = {s for s in specials if s and s.strip()}
    if not specials:
        return None
    return re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))


def _where(pair: ConsistencyPair, source: str) -> tuple[str, int]:
    return pair.where if pair.where[0] else (source, 0)


def _special_problems(pairs: list[ConsistencyPair], pattern: re.Pattern[str] | None, source: str) -> list[PairProblem]:
    problems = []
    for pair in pairs if pattern is not None else ():
        for side in SIDES:
            for i, message in enumerate(getattr(pair, side)):
                found = pattern.search(str(message.get("content", "")))
                if found:
                    problems.append(PairProblem(*_where(pair, source), f"{side}[{i}].content", (
                        f"pair {pair.id!r} holds {found.group()!r}, a special token of the model's tokenizer, which "
                        "it would turn into that control token; remove it (or set data.allow_special_tokens: true "
                        "if it is meant)")))
    return problems


def _length_problems(
    pairs: list[ConsistencyPair], render: Callable[[list[dict[str, str]]], list[int]], budget: Budget, source: str
) -> dict[str, list[PairProblem]]:
    """pair id -> what is too long in it."""
    out: dict[str, list[PairProblem]] = {}
    for pair in pairs:
        for side in SIDES:
            why = budget.problem(len(render(getattr(pair, side))))
            if why:
                out.setdefault(pair.id, []).append(PairProblem(*_where(pair, source), side, f"pair {pair.id!r}: {why}"))
    return out


def check_prompts(
    cfg: RunConfig, tokenizer: PreTrainedTokenizerBase, pairs: list[ConsistencyPair], validation: list[ConsistencyPair]
) -> tuple[list[ConsistencyPair], list[ConsistencyPair]]:
    """The training and validation pairs once every prompt is checked (see the module docstring);
    raises :class:`PairFileError` naming each problem (file:line: field: length and limit), or returns
    the pairs less those dropped under ``data.too_long: drop``."""
    rendered: dict[str, list[int]] = {}
    renderer = PromptRenderer.for_model(tokenizer, cfg.model)

    def render(messages: list[dict[str, str]]) -> list[int]:
        key = json.dumps(messages, sort_keys=True)
        if key not in rendered:
            rendered[key] = renderer(messages)
        return rendered[key]

    positions = model_positions(cfg.model)
    budgets = {
        "data.train": Budget(cfg.data.max_prompt_tokens, positions, generated_tokens({cfg.method: cfg.method_config})),
        "data.validation": Budget(cfg.data.max_prompt_tokens, positions, generated_tokens({"validation": cfg.validation})),
    }
    pattern = special_token_pattern(tokenizer)
    groups = {"data.train": pairs, "data.validation": validation}
    special = [p for key, group in groups.items() for p in _special_problems(group, pattern, key)]
    if special and not cfg.data.allow_special_tokens:
        raise PairFileError(special)
    if special:
        warnings.warn(f"{len(special)} prompt messages hold special-token text (first: {special[0]}); kept, as "
                      "data.allow_special_tokens is true", TrainingDataWarning, stacklevel=2)
    too_long = {key: _length_problems(group, render, budgets[key], key) for key, group in groups.items()}
    problems = [p for found in too_long.values() for listed in found.values() for p in listed]
    if problems and cfg.data.too_long == "error":
        raise PairFileError(problems)
    if problems:
        kept = {key: [p for p in group if p.id not in too_long[key]] for key, group in groups.items()}
        warnings.warn(f"data.too_long: drop: dropped {len(too_long['data.train'])} training and "
                      f"{len(too_long['data.validation'])} validation pairs too long for the model (first: "
                      f"{problems[0]})", TrainingDataWarning, stacklevel=2)
        if not kept["data.train"]:
            raise PairFileError(problems)
        return kept["data.train"], kept["data.validation"]
    return pairs, validation
