"""Capability tasks on real benchmarks: multiple choice (GPQA / MMLU style), MATH-500, IFEval."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opct.datasets.base import EvalItem
from opct.evals.task import EvalTask, Judgement, Unit
from opct.metrics import Estimate, rate

PARSER_VERSION = "1"


def _units(items: Sequence[EvalItem], split: str = "eval") -> list[Unit]:
    return [Unit(item_id=it.id, variant="clean", prompt=it.prompt, split=split, meta=dict(it.meta)) for it in items]


def accuracy_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Estimate]:
    """``accuracy`` over all records (unparsable = wrong, as benchmarks report it) and ``parse_rate``."""
    return {
        "accuracy": rate(bool(r["scores"]["correct"]) for r in records),
        "parse_rate": rate(r["parsed"] is not None for r in records),
    }


def multiple_choice_task(name: str, items: Sequence[EvalItem], max_new_tokens: int = 512) -> EvalTask:
    """Accuracy on lettered multiple choice; the letter is read by :func:`opct.parsing.extract_choice`."""
    from opct.parsing import extract_choice

    def score(unit: Unit, response: str) -> Judgement:
        letters = unit.meta.get("letters", "ABCD")
        parsed = extract_choice(response, unit.meta.get("options"), letters=letters)
        return Judgement(parsed, {"correct": parsed == unit.meta["answer"]}, "mc-letter", PARSER_VERSION)

    return EvalTask(name, _units(items), score, accuracy_metrics, max_new_tokens, "multiple-choice accuracy")


def math_task(items: Sequence[EvalItem], name: str = "math500", max_new_tokens: int = 1024) -> EvalTask:
    """MATH-500: the final answer checked for equivalence with ``math-verify``."""
    from opct.parsing import grade_math

    def score(unit: Unit, response: str) -> Judgement:
        g = grade_math(response, unit.meta["answer"])
        return Judgement(g["pred"], {"correct": bool(g["correct"])}, "math-verify", PARSER_VERSION)

    return EvalTask(name, _units(items), score, accuracy_metrics, max_new_tokens, "MATH-500 accuracy (math-verify)")


def ifeval_task(items: Sequence[EvalItem], name: str = "ifeval", max_new_tokens: int = 1024) -> EvalTask:
    """IFEval: prompt-level strict accuracy (the paper's metric), plus loose and instruction level."""
    from opct.ifeval import evaluate_response

    def score(unit: Unit, response: str) -> Judgement:
        res = evaluate_response(unit.meta["instruction_id_list"], unit.meta["kwargs"], response, item_id=unit.item_id)
        scores = {"prompt_strict": res.prompt_strict, "prompt_loose": res.prompt_loose, "strict": res.strict, "loose": res.loose}
        return Judgement(None, scores, "ifeval-offline", PARSER_VERSION)

    def metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Estimate]:
        return {
            "prompt_level_strict_acc": rate(r["scores"]["prompt_strict"] for r in records),
            "prompt_level_loose_acc": rate(r["scores"]["prompt_loose"] for r in records),
            "inst_level_strict_acc": rate(v for r in records for v in r["scores"]["strict"]),
            "inst_level_loose_acc": rate(v for r in records for v in r["scores"]["loose"]),
        }

    return EvalTask(name, _units(items), score, metrics, max_new_tokens, "IFEval (offline checker)")
