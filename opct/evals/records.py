"""The eval record: one JSON line per judged sample, read back after an interruption; a task's results
(metrics, outcome counts, status) from its records, and their strict-JSON form in ``results.json``."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.errors import OpctError, OpctWarning
from opct.evals.contract import EvalTask, Unit
from opct.evals.judging import Scored, score_batch
from opct.evals.outcomes import (
    DEFAULT_MAX_UNSCORED,
    DEGENERATE,
    ERROR,
    TRUNCATED,
    answer_text,
    count_outcomes,
    judgement_outcome,
    record_outcome,
    status,
    unjudged_outcome,
    visible_text_outcome,
)
from opct.stats.estimate import Estimate


@dataclass
class EvalResult:
    """A finished evaluation: its metrics, its outcome counts, whether it is complete, where its files are.

    ``status`` is ``"ok"`` or ``"incomplete"`` (more than ``max_unscored`` of the records unscored).
    """

    task: str
    metrics: dict[str, Estimate]
    n_records: int
    unscored: int
    path: Path
    reused: bool = False
    outcomes: dict[str, int] | None = None
    unscored_classes: tuple[str, ...] = ()
    status: str = "ok"
    max_unscored: float = DEFAULT_MAX_UNSCORED


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of ``samples.jsonl`` up to its first unreadable line; that line and any after it (cut
    by an interruption) are dropped with a warning giving the count, and measured again."""
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict):
            break  # a line cut by an interruption: everything after it is regenerated
        out.append(record)
    if len(out) < len(lines):
        warnings.warn(f"{path}: dropped {len(lines) - len(out)} line(s) from line {len(out) + 1} on (cut by an "
                      "interruption or edited); those samples are measured again", OpctWarning, stacklevel=2)
    return out


def estimate_from_record(raw: dict[str, Any]) -> Estimate:
    """An :class:`Estimate` from its ``results.json`` record (a ``null`` number is ``nan`` again)."""
    fields = Estimate.__dataclass_fields__
    kept = {k: v for k, v in raw.items() if k in fields}
    for key in ("value", "ci_low", "ci_high"):
        if kept.get(key) is None:
            kept[key] = math.nan
    return Estimate(**kept)


#: The numbers of a metric record that may be undefined (written as ``null`` with a ``reason``).
_NUMBERS = ("value", "ci_low", "ci_high", "n_eff")


def metric_record(est: Estimate, unscored: dict[str, int], counted_wrong: dict[str, int] | None = None) -> dict[str, Any]:
    """``est`` as strict JSON, with what its n left out and the failures it keeps (capability's ``counted_wrong``):
    a non-finite number is ``null`` and ``reason`` says why (``n = 0``: nothing was scored)."""
    record: dict[str, Any] = {**est.to_dict(), "unscored": unscored, **({"counted_wrong": counted_wrong} if counted_wrong else {})}
    bad = [k for k in _NUMBERS if isinstance(record.get(k), float) and not math.isfinite(record[k])]
    for key in bad:
        record[key] = None
    if bad:
        record["reason"] = ("n = 0: no scored records" if not est.n
                            else f"{', '.join(bad)} not finite (the metric is undefined on these records)")
    return record


def strict_json(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` unchanged, after checking that it is strict JSON (no ``NaN``/``Infinity``); raises ValueError."""
    json.dumps(data, allow_nan=False, default=str)
    return data


class EvalOutputError(OpctError, ValueError):
    """An eval output folder that holds results of other weights or settings (they would be overwritten)."""


def read_eval_json(path: Path) -> dict[str, Any]:
    """A ``results.json`` or ``state.json`` of an eval, or an error naming the file when it was cut or edited."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise EvalOutputError(
            f"{path} is not readable JSON ({err}); it was cut off or edited. Delete it (the eval is measured "
            "again, reusing the samples already written) or restore it."
        ) from None


def results_written(done: dict[str, Any]) -> bool:
    """Whether a ``results.json`` holds a finished eval's results: its ``status`` is ``ok`` or ``incomplete``
    (files written before ``status`` was the one flag: ``complete: true``)."""
    return done.get("status") in ("ok", "incomplete") or done.get("complete") is True


def result_from_records(
    task: EvalTask, records: list[dict[str, Any]], path: Path, max_unscored: float = DEFAULT_MAX_UNSCORED
) -> EvalResult:
    """``task``'s metrics, outcome counts and status over ``records`` (its judged samples, from any runner)."""
    outcomes = count_outcomes(record_outcome(r) for r in records)
    unscored = sum(outcomes[c] for c in task.unscored_classes)
    return EvalResult(task.name, task.metrics(records), len(records), unscored, path, outcomes=outcomes,
                      unscored_classes=task.unscored_classes, status=status(unscored, len(records), max_unscored),
                      max_unscored=max_unscored)


def judges_cut(task: EvalTask, truncated: bool) -> bool:
    """Whether a reply goes to the judges as far as its cut goes: every reply of a task that judges cut
    replies on their visible text (the safety axes); a cut one never otherwise (capability)."""
    return not truncated or task.judges_cut_replies


def sample_record(eval_name: str, unit: Unit, sample: int, response: str, truncated: bool, task: EvalTask,
                  reasoning: str = "strip", scored: Scored | None = None) -> dict[str, Any]:
    """One sample's record: the raw response, what the judges saw, the judgement and its outcome class.

    ``scored``: the judgement :func:`~opct.evals.judging.score_batch` already made of the answer (or the
    exception scoring it raised); without it the task's scorer is called here."""
    text = answer_text(response, reasoning)
    parsed, scores, judge, version, ok, error = None, {}, "", "", True, None
    judged_scores: dict[str, Any] = {}
    unjudged = unjudged_outcome(text) or (None if judges_cut(task, truncated) else TRUNCATED)
    if unjudged:  # empty, or cut off where the task never judges a cut answer: no judge is asked
        outcome = unjudged
    else:
        # an OpctError (a judge outage, bad data) is raised: it stops the eval, the records written are kept
        j = scored if scored is not None else score_batch(task.score, [(unit, text)])[0]
        if isinstance(j, Exception):  # a scorer bug: recorded, counted, never a result
            outcome, ok, error = ERROR, False, f"{type(j).__name__}: {j}"
        else:
            parsed, scores, judge, version, ok = j.parsed, j.scores, j.judge, j.judge_version, j.ok
            outcome = judgement_outcome(scores, parsed, needs_answer=task.needs_answer, ok=ok)
            outcome = visible_text_outcome(outcome, text, truncated, scores, parsed, task.needs_answer)
            if outcome in (DEGENERATE, TRUNCATED):  # judged, but in no denominator: the verdict is kept apart
                judged_scores, scores = scores, {}
    rec = {
        "eval": eval_name,
        "item_id": unit.item_id,
        "variant": unit.variant,
        "split": unit.split,
        "sample": sample,
        "prompt": unit.prompt,
        "response": response,
        "reasoning": reasoning,
        "truncated": truncated,
        "outcome": outcome,
        "parsed": parsed,
        "judge": judge,
        "judge_version": version,
        "scores": scores,
        "ok": ok,
        "meta": unit.meta,
    }
    if error:
        rec["error"] = error
    if judged_scores:
        rec["judged_scores"] = judged_scores
    return rec
