"""Strict/loose IFEval evaluation of responses and the four standard accuracies, by lm-eval's checkers.

Each verdict is lm-eval's own (``lm_eval.tasks.ifeval.utils.test_instruction_following_strict`` and
``..._loose``, the functions its ``process_results`` calls), so opct's IFEval numbers are lm-eval's:

* **strict**: each instruction is checked on the response as given (an empty response fails);
* **loose**: an instruction passes if it holds for any of eight variants of the response (as given,
  without its first line, its last line or both, and each of those with every ``*`` removed).

Metrics (:func:`ifeval_metrics`): prompt-level strict accuracy (all instructions of a prompt pass;
the IFEval paper's headline and opct's reported number), prompt-level loose, and instruction-level
strict/loose (fraction of all instructions that pass).

Where an instruction's kwargs are incomplete or out of range, lm-eval's checker draws a replacement
from Python's ``random`` (in the IFEval set: ``keywords:letter_frequency`` with the letter ``#`` or
``!``, prompts 1122 and 1129), so lm-eval's verdict on those varies from run to run. opct seeds
``random`` with :data:`RANDOM_SEED` before each response's checks and restores the caller's random
state afterwards: the same response always gets the same verdict, the one lm-eval's
``process_results`` gives after ``random.seed(RANDOM_SEED)``.
"""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from opct.ifeval.checkers import checker_version, lm_eval_ifeval, validate_instructions

__all__ = ["RANDOM_SEED", "IFEvalResult", "evaluate_item", "evaluate_response", "ifeval_metrics"]

#: The seed of Python's ``random`` while lm-eval's checkers run (see the module docstring).
RANDOM_SEED = 0
_RANDOM_LOCK = threading.Lock()  # the seeded stretch uses the process-wide ``random`` state


@dataclass
class IFEvalResult:
    """Per-instruction verdicts for one prompt."""

    id: str
    instruction_ids: list[str]
    strict: list[bool]
    loose: list[bool]

    @property
    def prompt_strict(self) -> bool:
        """All instructions pass in strict mode."""
        return all(self.strict)

    @property
    def prompt_loose(self) -> bool:
        """All instructions pass in loose mode."""
        return all(self.loose)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict including the two prompt-level verdicts."""
        return {**asdict(self), "prompt_strict": self.prompt_strict, "prompt_loose": self.prompt_loose}


def evaluate_response(
    instruction_ids: Sequence[str],
    kwargs_list: Sequence[dict[str, Any]],
    response: str | None,
    *,
    item_id: str = "",
    prompt: str = "",
) -> IFEvalResult:
    """Check ``response`` against each instruction, strict and loose, with lm-eval's checkers.

    ``kwargs_list`` has one dict per instruction (``None``/empty values are left out, as lm-eval
    does); ``prompt`` is the prompt text, which lm-eval hands to any instruction that asks for it.
    An unknown id or kwargs an instruction does not take raise
    :class:`opct.ifeval.checkers.InstructionError`; a missing lm-eval (or one of the packages its
    checkers import) raises :class:`opct.errors.MissingExtraError` naming the ``data`` extra.
    """
    if len(instruction_ids) != len(kwargs_list):
        raise ValueError(f"{len(instruction_ids)} instruction ids but {len(kwargs_list)} kwargs entries")
    utils = lm_eval_ifeval()
    ids, kwargs = list(instruction_ids), [dict(kw) for kw in kwargs_list]
    example = utils.InputExample(key=0, instruction_id_list=ids, prompt=prompt, kwargs=kwargs)
    response = response or ""
    with _RANDOM_LOCK:
        state = random.getstate()
        try:
            validate_instructions(ids, kwargs)
            random.seed(RANDOM_SEED)
            strict = utils.test_instruction_following_strict(example, response).follow_instruction_list
            loose = utils.test_instruction_following_loose(example, response).follow_instruction_list
        finally:
            random.setstate(state)
    return IFEvalResult(item_id, ids, [bool(v) for v in strict], [bool(v) for v in loose])


def evaluate_item(item: Any, response: str | None) -> IFEvalResult:
    """Evaluate a response to an IFEval :class:`opct.datasets.EvalItem` (uses its ``meta`` and prompt)."""
    meta = item.meta
    return evaluate_response(meta["instruction_id_list"], meta["kwargs"], response, item_id=item.id,
                             prompt=item.user_text)


def ifeval_metrics(results: Iterable[IFEvalResult]) -> dict[str, Any]:
    """The four IFEval accuracies plus counts and a per-instruction-id breakdown.

    Keys: ``prompt_level_strict_acc``, ``prompt_level_loose_acc``, ``inst_level_strict_acc``,
    ``inst_level_loose_acc``, ``n_prompts``, ``n_instructions``, ``per_instruction``
    (``{id: {"n", "strict_acc", "loose_acc"}}``) and ``checker`` (``lm-eval <version>``).
    """
    results = list(results)
    flat_strict = [v for r in results for v in r.strict]
    flat_loose = [v for r in results for v in r.loose]
    per: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for r in results:
        for iid, s, lo in zip(r.instruction_ids, r.strict, r.loose, strict=True):
            per[iid].append((s, lo))

    def frac(values: list[bool]) -> float:
        return sum(values) / len(values) if values else 0.0

    return {
        "prompt_level_strict_acc": frac([r.prompt_strict for r in results]),
        "prompt_level_loose_acc": frac([r.prompt_loose for r in results]),
        "inst_level_strict_acc": frac(flat_strict),
        "inst_level_loose_acc": frac(flat_loose),
        "n_prompts": len(results),
        "n_instructions": len(flat_strict),
        "per_instruction": {
            iid: {"n": len(v), "strict_acc": frac([s for s, _ in v]), "loose_acc": frac([lo for _, lo in v])}
            for iid, v in sorted(per.items())
        },
        "checker": f"lm-eval {checker_version()}",
    }
