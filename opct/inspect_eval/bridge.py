"""An opct eval as an Inspect ``Task``: the same units, the same scorer and outcome classes, the same metrics.

One Inspect sample per opct unit (``id`` = ``<eval>|<item_id>|<variant>``); one epoch per opct sample
(``epochs = n``). The scorer turns each response into exactly the record :func:`opct.evals.runner.run_task`
writes (:func:`~opct.evals.runner.sample_record`, kept in the score's metadata), and the metric
recomputes opct's metrics over all records, unreduced across epochs, with the interval over the
eval's own unit of variation, ``n``, the unscored count and ``status``. The solver
(:func:`opct_generate`) sets each sample's seed from its key and epoch; opct's own model provider
(:mod:`opct.inspect_eval.provider`) reads the key and draws exactly the tokens ``opct eval`` draws.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Sequence
from pathlib import Path
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
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from opct.evals.runner import result_from_records, sample_record
from opct.evals.task import EvalTask, Unit
from opct.sampling.engine import sample_seed

#: The sample being generated, as ``(key, sample index, run seed)``: set by :func:`opct_generate`, read by
#: opct's model provider so each sample's random stream is the one ``opct eval`` gives it.
CURRENT_SAMPLE: contextvars.ContextVar[tuple[str, int, int] | None] = contextvars.ContextVar("opct_sample", default=None)

#: Built tasks by id, so the registered scorer and metric (whose arguments Inspect logs) take a short id.
_BUILT: dict[str, dict[str, EvalTask]] = {}
_ids = itertools.count()

_ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}


def to_messages(prompt: list[dict[str, str]]) -> list[ChatMessage]:
    """opct's ``[{role, content}]`` prompt as Inspect chat messages."""
    return [_ROLES[m["role"]](content=m["content"]) for m in prompt]


def to_sample(eval_name: str, unit: Unit) -> Sample:
    """One opct unit as an Inspect sample; the unit itself rides in the metadata."""
    return Sample(
        id=f"{eval_name}|{unit.key}",
        input=to_messages(unit.prompt),
        metadata={"opct_eval": eval_name, "opct_key": unit.key, "opct_unit": unit.to_dict()},
    )


@solver
def opct_generate(build: str, seed: int = 0, max_new_tokens: int = 512) -> Solver:
    """Generate once per sample and epoch, as ``opct eval`` does: at most ``min(max_new_tokens, the eval's
    own limit)`` tokens, with the sample's own seed ``sample_seed(seed, unit key, epoch - 1)`` (and,
    through :data:`CURRENT_SAMPLE`, its exact random stream under opct's provider)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        key, index = state.metadata["opct_key"], state.epoch - 1
        limit = min(max_new_tokens, _BUILT[build][state.metadata["opct_eval"]].max_new_tokens)
        token = CURRENT_SAMPLE.set((key, index, seed))
        try:
            return await generate(state, seed=sample_seed(seed, key, index), max_tokens=limit)
        finally:
            CURRENT_SAMPLE.reset(token)

    return solve


def _unit(metadata: dict[str, Any]) -> Unit:
    return Unit(**metadata["opct_unit"])


@scorer(metrics=[])
def opct_scorer(build: str, reasoning: str = "strip") -> Scorer:
    """Judge a response as opct does: degenerate answers are ``empty`` without a judge, a scorer bug is
    ``error``, every other outcome class from the eval's own scorer. The record is the score's metadata."""

    async def score(state: TaskState, target: Target) -> Score:
        task = _BUILT[build][state.metadata["opct_eval"]]
        response = state.output.completion if state.output else ""
        truncated = bool(state.output) and state.output.stop_reason == "max_tokens"
        rec = sample_record(task.name, _unit(state.metadata), state.epoch - 1, response, truncated, task, reasoning)
        value: dict[str, str | int | float | bool | None] = {"outcome": rec["outcome"]}
        value.update({k: v for k, v in rec["scores"].items() if isinstance(v, str | int | float | bool) or v is None})
        return Score(value=value, answer=None if rec["parsed"] is None else str(rec["parsed"]), metadata={"opct_record": rec})

    return score


def records_of(scores: Sequence[SampleScore]) -> list[dict[str, Any]]:
    """The opct records carried by Inspect scores (every epoch of every sample)."""
    return [s.score.metadata["opct_record"] for s in scores if s.score.metadata and "opct_record" in s.score.metadata]


def summary(task: EvalTask, records: list[dict[str, Any]], expected: int, max_unscored: float) -> dict[str, float]:
    """opct's numbers for one eval as a flat mapping of floats (Inspect's metric values): each metric's
    value, interval and n, the number of records, the unscored count, and ``incomplete`` (1 when the
    unscored share is over ``max_unscored``).

    ``expected`` is the number of records a finished run has (units x epochs). Samples without a record
    (Inspect stopped, or a sample failed) are counted as ``missing`` and as unscored, never as results.
    While a run is in progress (Inspect shows metrics as it goes) a metric that needs records not yet
    there (sycophancy pairs each biased answer with its clean one) is ``nan``.
    """
    missing = max(0, expected - len(records))
    try:
        res = result_from_records(task, records, Path("."), max_unscored)
        estimates = res.metrics
    except ValueError:
        if not missing:
            raise
        res, estimates = None, {}
    out: dict[str, float] = {}
    for name, est in estimates.items():
        out[name], out[f"{name}_ci_low"], out[f"{name}_ci_high"] = est.value, est.ci_low, est.ci_high
        out[f"{name}_n"] = float(est.n)
    unscored = (res.unscored if res else 0) + missing
    out.update({"records": float(len(records)), "missing": float(missing), "unscored": float(unscored),
                "incomplete": float(not expected or unscored / expected > max_unscored)})
    return out


@metric(scores="unreduced")
def opct_metrics(build: str, epochs: int = 1, max_unscored: float = 0.05) -> Metric:
    """opct's metrics over all records (unreduced: every epoch is a sample), per eval when there are several."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        tasks = _BUILT[build]
        records = records_of(scores)
        if len(tasks) == 1:
            (task,) = tasks.values()
            return summary(task, records, len(task.units) * epochs, max_unscored)
        out: dict[str, float] = {}
        for name, task in tasks.items():
            mine = [r for r in records if r["eval"] == name]
            out.update({f"{name}/{k}": v for k, v in summary(task, mine, len(task.units) * epochs, max_unscored).items()})
        return out

    return compute


def inspect_task(
    tasks: Sequence[EvalTask],
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
    """One Inspect task over the units of ``tasks`` (one opct eval, or an axis's several), scored and
    measured as opct does. ``epochs`` is opct's ``n`` (samples per unit); the defaults are ``opct eval``'s
    (greedy, one sample). A ``max_new_tokens`` below 1 is a ``ValueError`` (0 is not "no limit")."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a whole number of at least 1, got {max_new_tokens!r}")
    build = f"b{next(_ids)}"
    _BUILT[build] = {t.name: t for t in tasks}
    samples = [to_sample(t.name, u) for t in tasks for u in t.units]
    return Task(
        dataset=MemoryDataset(samples, name=name or "+".join(_BUILT[build])),
        solver=opct_generate(build, seed, max_new_tokens),
        scorer=opct_scorer(build, reasoning),
        metrics=[opct_metrics(build, epochs, max_unscored)],
        epochs=Epochs(epochs),
        config=GenerateConfig(temperature=temperature, top_p=top_p),
        name=name,
        metadata={"opct_evals": list(_BUILT[build]), "opct_seed": seed, "opct_reasoning": reasoning},
    )
