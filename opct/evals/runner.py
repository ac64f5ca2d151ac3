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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opct.errors import OpctError
from opct.evals.contract import EvalTask, Unit
from opct.evals.identity import same_identity, stale_reason, task_identity, task_params
from opct.evals.judging import JudgedScorer, Scored, score_batch
from opct.evals.outcomes import DEFAULT_MAX_UNSCORED, DEGENERATE, answer_text, status, unjudged_outcome
from opct.evals.records import (
    EvalOutputError,
    EvalResult,
    estimate_from_record,
    judges_cut,
    metric_record,
    read_eval_json,
    read_records,
    result_from_records,
    results_written,
    sample_record,
    strict_json,
)
from opct.models import render_prompt
from opct.runs.atomic import write_json_atomic
from opct.runs.experiment_layout import RESULTS_FILE, SAMPLES_FILE, STATE_FILE
from opct.sampling.engine import SamplingEngine, SamplingParams

Progress = Callable[[int, int], None]


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
    params = task_params(task, params)
    identity = task_identity(task, params, model_id, model_identity, reasoning)
    stale = stale_reason(task_dir, identity)
    if stale and not discard_stale:
        raise EvalOutputError(f"{stale}. Use another --out, or delete {task_dir} to measure it again.")
    task_dir.mkdir(parents=True, exist_ok=True)
    if results_path.exists():
        done = read_eval_json(results_path)
        if results_written(done) and same_identity(done, identity):
            metrics = {k: estimate_from_record(v) for k, v in done["metrics"].items()}
            unscored = int(done["unscored"])
            return EvalResult(task.name, metrics, done["n_records"], unscored, results_path, reused=True,
                              outcomes=done.get("outcomes"), unscored_classes=tuple(done.get("unscored_classes", ())),
                              status=status(unscored, done["n_records"], max_unscored), max_unscored=max_unscored)
        results_path.unlink()

    records = [] if stale else read_records(samples_path)  # other weights, data or settings: start over
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
            judged = [i for i, text in enumerate(texts) if not unjudged_outcome(text) and judges_cut(task, rollouts[i].truncated)]
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

