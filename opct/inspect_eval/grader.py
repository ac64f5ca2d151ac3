"""Inspect's ``grader`` model role as opct's judge: ``inspect eval ... --model-role grader=<model>``.

When the run has a ``grader`` role, opct's tasks judge with it where they would ask a served judge: the
same rubrics as ``-T judge=http:<model>`` (StrongREJECT for jailbreak harm, SAGE's for awareness), sent
to ``get_model(role="grader")`` instead of an HTTP endpoint; refusals stay the rule judge, as under
``http:``. The judge spec is then ``inspect-grader:<grader model>``, recorded in every record and in the
results' identity. Without a grader role the task's own ``-T judge=`` is used. The organism's evals
keep its exact judges (they know the right answer; no model is asked), as ``opct eval`` does.

opct's judges are synchronous and run in a worker thread (:func:`asyncio.to_thread`, which copies the
context); :data:`GRADER` carries the grader model and the event loop to that thread, whose
:meth:`InspectGraderJudge._complete` runs the model's ``generate`` on the loop and waits for it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    Model,
    get_model,
    model_roles,
)

from opct.errors import OpctError
from opct.judges.factory import JUDGE_KINDS
from opct.judges.judge import Judge
from opct.judges.model_judge import JudgeOptions, RubricJudge
from opct.judges.rubrics import get_rubric
from opct.judges.rules import RefusalRuleJudge

#: The role opct's judges take from Inspect.
ROLE = "grader"
#: The judge kind that asks the grader.
KIND = "inspect-grader"
#: ``(grader model, the event loop it runs on)`` while a score is being judged.
GRADER: contextvars.ContextVar[tuple[Model, asyncio.AbstractEventLoop] | None] = contextvars.ContextVar(
    "opct_grader", default=None)

_ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}


class InspectGraderJudge(RubricJudge):
    """A rubric answered by Inspect's ``grader`` model role (only inside an Inspect run that has one)."""

    kind = KIND
    code_version = "1"

    def __init__(self, rubric: Any, model: str) -> None:
        RubricJudge.__init__(self, rubric, model, cache_dir=None)

    def _complete(self, messages: list[dict[str, str]]) -> str:
        current = GRADER.get()
        if current is None:
            raise OpctError(f"judge {KIND}:{self.model} asks Inspect's grader model, which only exists inside "
                            "an Inspect run given --model-role grader=<model>; use -T judge=rule or http:<model>")
        model, loop = current
        chat = [_ROLES[m["role"]](content=m["content"]) for m in messages]
        output = asyncio.run_coroutine_threadsafe(model.generate(chat), loop).result()
        return output.completion


@JUDGE_KINDS.register(KIND)
def inspect_grader_judge(role: str, argument: str, options: JudgeOptions | None = None) -> Judge | None:
    """The ``http:`` kind's rubrics (refusal: the rule judge) answered by Inspect's grader model."""
    rubrics = {"harm": "strongreject", "warning": "sage_unsafe"}
    if role == "refusal":
        return RefusalRuleJudge()
    if role not in rubrics:
        raise ValueError(f"judge kind {KIND!r} has no {role!r} judge; roles: refusal, harm, warning")
    return InspectGraderJudge(get_rubric(rubrics[role]), argument)


def grader_model() -> Model | None:
    """The run's ``grader`` role model, or ``None`` when Inspect was given none."""
    return get_model(role=ROLE) if model_roles().get(ROLE) is not None else None


def judged_args(task_args: dict[str, Any], grader: Model | None) -> dict[str, Any]:
    """The task's arguments with the judge the run asks for: the grader's when there is one."""
    return task_args if grader is None else {**task_args, "judge": f"{KIND}:{grader}"}


@contextmanager
def grading_with(grader: Model | None) -> Iterator[None]:
    """Make ``grader`` (when given) the model :class:`InspectGraderJudge` asks, in this context and the
    worker threads started from it."""
    token = GRADER.set(None if grader is None else (grader, asyncio.get_running_loop()))
    try:
        yield
    finally:
        GRADER.reset(token)
