"""The capability axis's eval tasks: real benchmarks (multiple choice in the GPQA / MMLU style,
MATH-500, IFEval) and the organism's multiple-choice facts, arithmetic and format following, judged
exactly; their accuracy metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opct.datasets.base import EvalItem
from opct.datasets.diamond import load_gpqa_diamond
from opct.datasets.ifeval import load_ifeval
from opct.datasets.math500 import load_math500
from opct.datasets.multiple_choice import load_multiple_choice
from opct.evals.contract import (
    CAPABILITY_COUNTED_WRONG,
    CAPABILITY_UNSCORED,
    EvalTask,
    Judgement,
    Unit,
    seeded_sample,
)
from opct.evals.outcomes import ABSTAINED, ERROR
from opct.evals.parsing import extract_choice, grade_math
from opct.ifeval import checker_version, evaluate_response
from opct.organism import items as I
from opct.stats.estimate import Estimate, rate

PARSER_VERSION = "1"


def _units(items: Sequence[EvalItem], split: str = "eval") -> list[Unit]:
    return [Unit(item_id=it.id, variant="clean", prompt=it.prompt, split=split, meta=dict(it.meta)) for it in items]


#: How every capability task treats outcomes: abstentions and errors are left out of n; empty, unparsed
#: and cut-off answers are wrong answers (counted, and shown beside the rate); a cut answer is not judged.
CAPABILITY_OUTCOMES: dict[str, Any] = {"unscored_classes": CAPABILITY_UNSCORED,
                                       "counted_wrong_classes": CAPABILITY_COUNTED_WRONG, "judges_cut_replies": False}

def correct_of(record: Mapping[str, Any], key: str = "correct") -> bool:
    """Whether a record was judged correct; an empty or unjudged answer is not."""
    return bool((record.get("scores") or {}).get(key))


def _scored(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records in the denominator: all but the abstained and errored ones (an empty or unparsed
    answer stays in, as a wrong answer)."""
    return [r for r in records if r.get("outcome") not in (ABSTAINED, ERROR)]


def accuracy_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Estimate]:
    """``accuracy`` over every answered record (unparsable or empty = wrong, as benchmarks report it;
    the outcome counts beside it say how many) and ``parse_rate``."""
    rows = _scored(records)
    return {
        "accuracy": rate(correct_of(r) for r in rows),
        "parse_rate": rate(r["parsed"] is not None for r in rows),
    }


def multiple_choice_task(name: str, items: Sequence[EvalItem], max_new_tokens: int = 512) -> EvalTask:
    """Accuracy on lettered multiple choice; the letter is read by :func:`opct.evals.parsing.extract_choice`."""
    def score(unit: Unit, response: str) -> Judgement:
        letters = unit.meta.get("letters", "ABCD")
        parsed = extract_choice(response, unit.meta.get("options"), letters=letters)
        return Judgement(parsed, {"correct": parsed == unit.meta["answer"]}, "mc-letter", PARSER_VERSION)

    return EvalTask(name, _units(items), score, accuracy_metrics, max_new_tokens, "multiple-choice accuracy",
                    needs_answer=True, **CAPABILITY_OUTCOMES)


def math_task(items: Sequence[EvalItem], name: str = "math500", max_new_tokens: int = 1024) -> EvalTask:
    """MATH-500: the final answer checked for equivalence with ``math-verify``."""
    def score(unit: Unit, response: str) -> Judgement:
        g = grade_math(response, unit.meta["answer"])
        return Judgement(g["pred"], {"correct": bool(g["correct"])}, "math-verify", PARSER_VERSION)

    return EvalTask(name, _units(items), score, accuracy_metrics, max_new_tokens, "MATH-500 accuracy (math-verify)",
                    needs_answer=True, **CAPABILITY_OUTCOMES)


def ifeval_task(items: Sequence[EvalItem], name: str = "ifeval", max_new_tokens: int = 1024) -> EvalTask:
    """IFEval: prompt-level strict accuracy (the paper's metric), plus loose and instruction level,
    by lm-eval's instruction checkers (:mod:`opct.ifeval`)."""
    def score(unit: Unit, response: str) -> Judgement:
        res = evaluate_response(unit.meta["instruction_id_list"], unit.meta["kwargs"], response, item_id=unit.item_id)
        scores = {"prompt_strict": res.prompt_strict, "prompt_loose": res.prompt_loose, "strict": res.strict, "loose": res.loose}
        return Judgement(None, scores, "lm-eval-ifeval", checker_version())

    def instructions(r: Mapping[str, Any], key: str) -> list[bool]:
        got = (r.get("scores") or {}).get(key)  # an empty answer follows none of its instructions
        return list(got) if got is not None else [False] * len(r["meta"]["instruction_id_list"])

    def metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Estimate]:
        rows = _scored(records)
        return {
            "prompt_level_strict_acc": rate(correct_of(r, "prompt_strict") for r in rows),
            "prompt_level_loose_acc": rate(correct_of(r, "prompt_loose") for r in rows),
            "inst_level_strict_acc": rate(v for r in rows for v in instructions(r, "strict")),
            "inst_level_loose_acc": rate(v for r in rows for v in instructions(r, "loose")),
        }

    return EvalTask(name, _units(items), score, metrics, max_new_tokens, "IFEval (lm-eval's checkers)",
                    **CAPABILITY_OUTCOMES)


#: Items per organism capability task (a seeded sample).
ORGANISM_ITEMS = 120


def organism_capability_tasks(world: Any, size: int | None, make_judge: Any) -> list[EvalTask]:
    """Multiple-choice facts, arithmetic, worked multi-step arithmetic and format following (the
    organism's MMLU, MATH and IFEval), each judged exactly by ``make_judge(role)`` (roles ``mc``,
    ``arithmetic``, ``chain``, ``format``)."""
    specs = [
        ("capability_mc", I.capability_mc(world), "mc"),
        ("capability_arithmetic", I.capability_arithmetic(world), "arithmetic"),
        ("capability_chain", I.capability_chain(world), "chain"),
        ("capability_format", I.capability_format(world), "format"),
    ]
    tasks = []
    for name, items, role in specs:
        units = [I.item_unit(x, x["id"], "clean") for x in seeded_sample(items, size, f"organism-eval-{name}")]

        judge = make_judge(role)

        def score(unit: Unit, response: str, judge: Any = judge) -> Judgement:
            v = judge.judge(unit.prompt[-1]["content"], response, unit.meta)
            parsed = None if v.label == "unparsed" else v.label
            return Judgement(parsed, {"correct": v.score >= 0.5}, v.judge, v.judge_version)

        def metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Estimate]:
            return {"accuracy": rate(correct_of(r) for r in _scored(records))}

        tasks.append(EvalTask(name, units, score, metrics, I.EVAL_TOKEN_CAP, f"organism {name}",
                              needs_answer=role != "format", **CAPABILITY_OUTCOMES))
    return tasks


def real_capability_tasks(paths: Mapping[str, str], limit: int | None = None) -> list[EvalTask]:
    """Tasks for the benchmark data given: ``gpqa`` (GPQA-Diamond), ``mmlu`` (MMLU-style multiple
    choice), ``math500``, ``ifeval``; ``limit`` items each (a seeded sample). Each path is a file, a
    ``save_to_disk`` folder or a hub id ``owner/name[:config][@revision]`` (see docs/data.md)."""
    tasks: list[EvalTask] = []
    if paths.get("gpqa"):
        tasks.append(multiple_choice_task("gpqa", seeded_sample(load_gpqa_diamond(paths["gpqa"]), limit, 0)))
    if paths.get("mmlu"):
        tasks.append(multiple_choice_task("mmlu", seeded_sample(load_multiple_choice(paths["mmlu"]), limit, 0)))
    if paths.get("math500"):
        tasks.append(math_task(seeded_sample(load_math500(paths["math500"]), limit, 0)))
    if paths.get("ifeval"):
        tasks.append(ifeval_task(seeded_sample(load_ifeval(paths["ifeval"]), limit, 0)))
    return tasks
