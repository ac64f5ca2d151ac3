"""An opct eval as an Inspect ``Task``: the same units, the same scorer and outcome classes.

One Inspect sample per opct unit (``id`` = ``<eval>|<item_id>|<variant>``, ``target`` the unit's gold
answer or expected behaviour, metadata its cluster and slice: :mod:`opct.inspect_eval.scoring`); one
epoch per opct sample (``epochs = n``). The scorer turns each response into exactly the record
:func:`opct.evals.runner.run_task` writes (:func:`~opct.evals.records.sample_record`, kept in the score's
metadata) and the axis's headline values (the score's value); Inspect's metrics summarise those, over
the samples it evaluated (all, or ``--limit``'s). Solver and scorer take the task's name and
arguments, from which they rebuild its eval tasks (:func:`opct.inspect_eval.tasks.built_tasks`), so
``inspect score LOG`` re-scores a log in a new process. The solver (:func:`opct_generate`) sets each
sample's seed from its key and epoch; opct's own model provider (:mod:`opct.inspect_eval.provider`)
reads the key and draws exactly the tokens ``opct eval`` draws. A ``grader`` model role
(``--model-role grader=...``) judges in place of opct's judge (:mod:`opct.inspect_eval.grader`).
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from inspect_ai import Epochs, Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
)
from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from opct.evals.contract import EvalTask, Unit
from opct.evals.records import sample_record
from opct.inspect_eval.grader import grader_model, grading_with, judged_args
from opct.inspect_eval.names import registered
from opct.inspect_eval.scoring import sample_groups, sample_target, score_value, task_metrics
from opct.inspect_eval.tasks import axis_of, built_tasks
from opct.sampling.engine import sample_seed

#: The sample being generated, as ``(key, sample index, run seed)``: set by :func:`opct_generate`, read by
#: opct's model provider so each sample's random stream is the one ``opct eval`` gives it.
CURRENT_SAMPLE: contextvars.ContextVar[tuple[str, int, int] | None] = contextvars.ContextVar("opct_sample", default=None)

_ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}


def to_messages(prompt: list[dict[str, str]]) -> list[ChatMessage]:
    """opct's ``[{role, content}]`` prompt as Inspect chat messages."""
    return [_ROLES[m["role"]](content=m["content"]) for m in prompt]


def to_sample(eval_name: str, unit: Unit, axis: str = "") -> Sample:
    """One opct unit as an Inspect sample: its target, its cluster and slice; the unit rides in the metadata."""
    return Sample(
        id=f"{eval_name}|{unit.key}",
        input=to_messages(unit.prompt),
        target=sample_target(axis, unit),
        metadata={"opct_eval": eval_name, "opct_key": unit.key, "opct_unit": unit.to_dict(),
                  **sample_groups(axis, eval_name, unit)},
    )


@solver(name=registered("opct_generate"))
def opct_generate(task: str, task_args: dict[str, Any], seed: int = 0, max_new_tokens: int = 512) -> Solver:
    """Generate once per sample and epoch, as ``opct eval`` does: at most ``min(max_new_tokens, the eval's
    own limit)`` tokens, with the sample's own seed ``sample_seed(seed, unit key, epoch - 1)`` (and,
    through :data:`CURRENT_SAMPLE`, its exact random stream under opct's provider)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        key, index = state.metadata["opct_key"], state.epoch - 1
        limit = min(max_new_tokens, built_tasks(task, task_args)[state.metadata["opct_eval"]].max_new_tokens)
        token = CURRENT_SAMPLE.set((key, index, seed))
        try:
            return await generate(state, seed=sample_seed(seed, key, index), max_tokens=limit)
        finally:
            CURRENT_SAMPLE.reset(token)

    return solve


def _unit(metadata: dict[str, Any]) -> Unit:
    return Unit(**metadata["opct_unit"])


def _opct_scorer(task: str, task_args: dict[str, Any], reasoning: str = "strip") -> Scorer:
    """Judge a response as opct does: degenerate answers are ``empty`` without a judge, a scorer bug is
    ``error``, every other outcome class from the eval's own scorer (its judge, or Inspect's ``grader``
    model role when one is given). The record is the score's metadata, the axis's headline values its value."""
    axis = axis_of(task, task_args)[0]

    async def score(state: TaskState, target: Target) -> Score:
        grader = grader_model()
        eval_task = built_tasks(task, judged_args(task_args, grader))[state.metadata["opct_eval"]]
        response = state.output.completion if state.output else ""
        truncated = bool(state.output) and state.output.stop_reason == "max_tokens"
        unit = _unit(state.metadata)
        with grading_with(grader):
            rec = await asyncio.to_thread(sample_record, eval_task.name, unit, state.epoch - 1, response, truncated,
                                          eval_task, reasoning)
        return Score(value=score_value(axis, eval_task, rec, unit),
                     answer=None if rec["parsed"] is None else str(rec["parsed"]),
                     explanation=f"outcome: {rec['outcome']}", metadata={"opct_record": rec})

    return score


#: The scorer opct's tasks use. Inspect writes a scorer's name into the log without its package
#: (``opct/opct/opct_scorer`` is logged as ``opct/opct_scorer``), and ``inspect score`` looks that name
#: up, loading the ``opct`` entry point first because it has a package prefix; so the scorer is also
#: registered as ``opct/opct_scorer`` (:data:`scorer_by_logged_name`).
opct_scorer = scorer(metrics=[], name=registered("opct/opct_scorer"))(_opct_scorer)
scorer_by_logged_name = scorer(metrics=[], name=registered("opct_scorer"))(_opct_scorer)

#: The key of opct's score in a sample's ``scores`` (the scorer's name as Inspect logs it).
SCORE_KEY = "opct/opct_scorer"


def inspect_task(
    task: str,
    task_args: dict[str, Any],
    *,
    seed: int = 0,
    epochs: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 512,
    top_p: float = 1.0,
    reasoning: str = "strip",
    max_unscored: float = 0.05,
    name: str | None = None,
) -> Task:
    """One Inspect task over the units of the opct task ``task`` (``sycophancy``, ``capability_mc``,
    ``eval``) with its ``task_args`` (one opct eval, or an axis's several), scored as opct does.
    ``epochs`` is opct's ``n`` (samples per unit); the defaults are ``opct eval``'s (greedy, one
    sample). A ``max_new_tokens`` below 1 is a ``ValueError`` (0 is not "no limit")."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a whole number of at least 1, got {max_new_tokens!r}")
    tasks: dict[str, EvalTask] = built_tasks(task, task_args)
    axis = axis_of(task, task_args)[0]
    samples = [to_sample(t.name, u, axis) for t in tasks.values() for u in t.units]
    return Task(
        dataset=MemoryDataset(samples, name=name or "+".join(tasks)),
        solver=opct_generate(task, task_args, seed, max_new_tokens),
        scorer=opct_scorer(task, task_args, reasoning),
        metrics=task_metrics(axis, tasks, max_unscored),
        epochs=Epochs(epochs),
        config=GenerateConfig(temperature=temperature, top_p=top_p),
        name=name,
        metadata={"opct_evals": list(tasks), "opct_seed": seed, "opct_reasoning": reasoning},
    )
