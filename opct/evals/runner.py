"""Run an evaluation task on a model: generate, judge, write records, compute metrics.

Per-sample records go to ``<out>/<task>/samples.jsonl`` as they are produced, one line per judged
sample; an interrupted run (or a judge outage) continues from the records already written. A task
whose scorer is a :class:`~opct.evals.judging.JudgedScorer` (the jailbreak and awareness evals) has
each batch of ``batch_units`` units judged at once, each judge asked about the whole batch
(:func:`~opct.evals.judging.score_batch`: a served judge keeps ``$OPCT_JUDGE_CONCURRENCY`` requests in
flight), and its records written after it; the verdicts a served judge gave before an outage are in
its cache, so a rerun does not ask for them again.
``results.json`` is written last, atomically, and only when every unit has its samples, so partial
results are never mistaken for complete ones.

Each record carries its outcome class (:mod:`opct.evals.outcomes`): an empty or degenerate response is
recorded as ``empty`` without asking any judge, and a scorer that raises gives ``error``. Results
count the classes; when the unscored share exceeds ``max_unscored`` the eval's ``status`` is
``incomplete``.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from opct.errors import OpctError, OpctWarning
from opct.evals.contract import EvalTask, Unit
from opct.evals.judging import JudgedScorer, Scored, score_batch
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
from opct.models import render_prompt
from opct.runs.atomic import write_json_atomic
from opct.runs.experiment_layout import RESULTS_FILE, SAMPLES_FILE, STATE_FILE
from opct.runs.identity import input_changes
from opct.sampling.engine import SamplingEngine, SamplingParams
from opct.stats.estimate import Estimate

Progress = Callable[[int, int], None]


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



def _params_dict(params: SamplingParams) -> dict[str, Any]:
    out = {"n": params.n, "temperature": params.temperature, "top_p": params.top_p, "max_new_tokens": params.max_new_tokens, "seed": params.seed}
    if params.min_new_tokens:  # recorded only when set, so results written before it existed still match
        out["min_new_tokens"] = params.min_new_tokens
    return out


def _read_records(path: Path) -> list[dict[str, Any]]:
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


def _estimate(raw: dict[str, Any]) -> Estimate:
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


def task_identity(task: EvalTask, params: SamplingParams, model_id: str, model_identity: dict[str, Any] | None = None,
                  reasoning: str = "strip") -> dict[str, Any]:
    """What a task's records and results were measured with: its data, generation settings (``params``
    as the task caps them), reasoning handling, outcome rules, judge (when the task names one), the
    model as named, and ``model_identity`` (``weights_sha256``, rendering). Records are reused only
    under an equal identity (:func:`same_identity`)."""
    identity = {"data_hash": task.data_hash(), "generation_config": _params_dict(_task_params(task, params)),
                "model": model_id, "reasoning": reasoning, "outcome_rules": OUTCOME_RULES, **(model_identity or {})}
    if task.judge:
        identity["judge"] = task.judge
    return identity


def same_identity(old: dict[str, Any], identity: dict[str, Any]) -> bool:
    """Whether results recorded with ``old`` measured what ``identity`` describes: every key equal, except
    the model's name when the weights' hash is there (the same weights under another path are the same model)."""
    return not identity_changes(old, identity)


#: The inputs an eval or attack identity may omit, at their defaults (an omitted one is that default).
IDENTITY_DEFAULTS = {"generation_config.min_new_tokens": 0}


def identity_changes(old: dict[str, Any], identity: dict[str, Any]) -> list[str]:
    """The inputs of ``identity`` that the results recorded in ``old`` were measured with otherwise (dotted
    keys, :func:`opct.runs.identity.input_changes`); only ``identity``'s own sections are compared (``old``
    also holds the results), and ``model`` (the name) only when the weights' hash is not recorded."""
    recorded = {k: old[k] for k in identity if k in old}
    skip = {"model"} if identity.get("weights_sha256") else set()
    return input_changes(recorded, identity, defaults=IDENTITY_DEFAULTS, ignore=skip)


def _read_json(path: Path) -> dict[str, Any]:
    """A ``results.json`` or ``state.json`` of an eval, or an error naming the file when it was cut or edited."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise EvalOutputError(
            f"{path} is not readable JSON ({err}); it was cut off or edited. Delete it (the eval is measured "
            "again, reusing the samples already written) or restore it."
        ) from None


def stale_reason(task_dir: Path, identity: dict[str, Any]) -> str | None:
    """Why the records or results in ``task_dir`` were not measured with ``identity`` (the settings or
    weights that differ), or None when there is nothing there or they were."""
    results_path, samples_path, state_path = task_dir / RESULTS_FILE, task_dir / SAMPLES_FILE, task_dir / STATE_FILE
    if results_path.exists():
        done = _read_json(results_path)
        if changes := identity_changes(done, identity):
            return f"{results_path} was measured with other {', '.join(changes)}"
    if _read_records(samples_path):
        if not state_path.exists():
            return f"{samples_path} has records whose settings are not recorded ({state_path.name} is missing)"
        if changes := identity_changes(_read_json(state_path), identity):
            return f"{samples_path} holds records measured with other {', '.join(changes)}"
    return None


def _task_params(task: EvalTask, params: SamplingParams) -> SamplingParams:
    """``params`` with ``max_new_tokens`` capped at the task's (and ``min_new_tokens`` at that)."""
    max_new = min(params.max_new_tokens, task.max_new_tokens)
    return replace(params, max_new_tokens=max_new, min_new_tokens=min(params.min_new_tokens, max_new))


def run_task(
    task: EvalTask,
    engine: SamplingEngine,
    tokenizer: Any,
    out_dir: Path,
    params: SamplingParams,
    model_id: str,
    model_identity: dict[str, Any] | None = None,
    renderer: Callable[[list[dict[str, str]]], list[int]] | None = None,
    batch_units: int = 64,
    progress: Progress | None = None,
    reasoning: str = "strip",
    max_unscored: float = DEFAULT_MAX_UNSCORED,
    discard_stale: bool = True,
) -> EvalResult:
    """Evaluate ``task`` with ``engine``; resume from ``out_dir/<task>/samples.jsonl`` if present.

    ``reasoning``: ``strip`` removes ``<think>`` blocks before every parser and judge, ``keep`` judges
    the whole response. ``max_unscored``: the share of unscored records above which the result's
    ``status`` is ``incomplete``. Records and results are reused only when they were measured with the
    same :func:`task_identity`; others are discarded and measured again, or, without
    ``discard_stale``, refused (:class:`EvalOutputError`).
    """
    task_dir = out_dir / task.name
    samples_path, results_path = task_dir / SAMPLES_FILE, task_dir / RESULTS_FILE
    params = _task_params(task, params)
    identity = task_identity(task, params, model_id, model_identity, reasoning)
    stale = stale_reason(task_dir, identity)
    if stale and not discard_stale:
        raise EvalOutputError(f"{stale}. Use another --out, or delete {task_dir} to measure it again.")
    task_dir.mkdir(parents=True, exist_ok=True)
    if results_path.exists():
        done = _read_json(results_path)
        if results_written(done) and same_identity(done, identity):
            metrics = {k: _estimate(v) for k, v in done["metrics"].items()}
            unscored = int(done["unscored"])
            return EvalResult(task.name, metrics, done["n_records"], unscored, results_path, reused=True,
                              outcomes=done.get("outcomes"), unscored_classes=tuple(done.get("unscored_classes", ())),
                              status=status(unscored, done["n_records"], max_unscored), max_unscored=max_unscored)
        results_path.unlink()

    records = [] if stale else _read_records(samples_path)  # other weights, data or settings: start over
    state_path = task_dir / STATE_FILE
    write_json_atomic(state_path, identity)
    tmp = samples_path.with_name(samples_path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:  # keep only the valid prefix
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    tmp.replace(samples_path)
    have = {(r["item_id"], r["variant"], r["sample"]) for r in records}
    todo = [u for u in task.units if any((u.item_id, u.variant, s) not in have for s in range(params.n))]
    total = len(task.units)
    if progress:
        progress(total - len(todo), total)
    render = renderer or (lambda messages: render_prompt(tokenizer, messages))
    try:
        _measure(task, engine, tokenizer, todo, records, have, samples_path, params, render, batch_units, progress,
                 reasoning)
    except OpctError as err:  # a judge outage, bad data: the records stay, no results; state.json says why
        write_json_atomic(state_path, {**identity, "failed": str(err).splitlines()[0] if str(err) else type(err).__name__})
        raise

    result = result_from_records(task, records, results_path, max_unscored)
    metrics, outcomes, unscored, outcome_status = result.metrics, result.outcomes or {}, result.unscored, result.status
    unscored_counts, counted_wrong = ({c: outcomes[c] for c in classes if outcomes.get(c)}  # shown beside every rate
                                      for classes in ((*task.unscored_classes, DEGENERATE), task.counted_wrong_classes))
    write_json_atomic(
        results_path,
        strict_json({
            "eval": task.name,
            "model": model_id,
            "status": outcome_status,  # the one status: ok or incomplete (results.json exists only when every unit ran)
            "n": len(task.units),
            "n_records": len(records),
            "samples_sha256": hashlib.sha256(samples_path.read_bytes()).hexdigest(),  # the report checks it
            "metrics": {k: metric_record(v, unscored_counts, counted_wrong) for k, v in metrics.items()},
            "outcomes": outcomes,
            "unscored_classes": list(task.unscored_classes),
            **({"counted_wrong_classes": list(task.counted_wrong_classes)} if task.counted_wrong_classes else {}),
            "unscored": unscored,
            "unscored_share": unscored / len(records) if records else None,
            "max_unscored": max_unscored,
            "judges": sorted({f"{r['judge']}@{r['judge_version']}" for r in records if r.get("judge")}),
            **identity,
            "seed": params.seed,
        }),
    )
    return result


def _measure(task: EvalTask, engine: SamplingEngine, tokenizer: Any, todo: list[Unit], records: list[dict[str, Any]],
             have: set[tuple[Any, Any, int]], samples_path: Path, params: SamplingParams,
             render: Callable[[list[dict[str, str]]], list[int]], batch_units: int, progress: Progress | None,
             reasoning: str) -> None:
    """Generate and judge the samples of ``todo``, a batch at a time, appending each record to
    ``samples_path`` and ``records``."""
    total = len(task.units)
    for start in range(0, len(todo), batch_units):
        chunk = todo[start : start + batch_units]
        prompts = [render(u.prompt) for u in chunk]
        rollouts = [r for r in engine.generate(prompts, params, sample_keys=[u.key for u in chunk])
                    if (chunk[r.prompt_index].item_id, chunk[r.prompt_index].variant, r.sample_index) not in have]
        responses = [tokenizer.decode(r.completion_ids, skip_special_tokens=True) for r in rollouts]
        texts = [answer_text(response, reasoning) for response in responses]
        scored: dict[int, Scored] = {}  # judged as a batch; other scorers judge each record just before it is written
        if isinstance(task.score, JudgedScorer):
            judged = [i for i, text in enumerate(texts) if not unjudged_outcome(text) and _judges_cut(task, rollouts[i].truncated)]
            batch = score_batch(task.score, [(chunk[rollouts[i].prompt_index], texts[i]) for i in judged])
            scored = dict(zip(judged, batch, strict=True))
        with samples_path.open("a", encoding="utf-8") as fh:
            for i, (r, response) in enumerate(zip(rollouts, responses, strict=True)):
                rec = sample_record(task.name, chunk[r.prompt_index], r.sample_index, response, r.truncated, task, reasoning,
                                    scored.get(i))
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                fh.flush()
                records.append(rec)
        if progress:
            progress(total - len(todo) + start + len(chunk), total)


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


#: The version of the rules that assign outcome classes (part of a result's identity: results judged
#: under other rules are recomputed, never reused).
OUTCOME_RULES = "5"  # 5: a capability answer cut off, empty or unparsed is a wrong answer, not an unscored one


def _judges_cut(task: EvalTask, truncated: bool) -> bool:
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
    unjudged = unjudged_outcome(text) or (None if _judges_cut(task, truncated) else TRUNCATED)
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
