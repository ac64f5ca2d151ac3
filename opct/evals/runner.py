"""Run an evaluation task on a model: generate, judge, write records, compute metrics.

Per-sample records go to ``<out>/<task>/samples.jsonl`` as they are produced; an interrupted run
continues from the records already written. ``results.json`` is written last, atomically, and only
when every unit has its samples, so partial results are never mistaken for complete ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from opct.evals.task import EvalTask, Unit
from opct.manifest import write_json_atomic
from opct.metrics import Estimate, metrics_to_dict
from opct.models import render_prompt
from opct.rollout import SamplingEngine, SamplingParams

Progress = Callable[[int, int], None]


@dataclass
class EvalResult:
    """A finished evaluation: its metrics and where its files are."""

    task: str
    metrics: dict[str, Estimate]
    n_records: int
    unscored: int
    path: Path
    reused: bool = False


def _params_dict(params: SamplingParams) -> dict[str, Any]:
    out = {"n": params.n, "temperature": params.temperature, "top_p": params.top_p, "max_new_tokens": params.max_new_tokens, "seed": params.seed}
    if params.min_new_tokens:  # recorded only when set, so results written before it existed still match
        out["min_new_tokens"] = params.min_new_tokens
    return out


def _read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut by an interruption: everything after it is regenerated
    return out


def _unscored(records: list[dict[str, Any]]) -> int:
    n = 0
    for r in records:
        for k, v in (r.get("scores") or {}).items():
            if k.endswith("_abstained") and v:
                n += 1
                break
            if v is None or (isinstance(v, float) and math.isnan(v)):
                n += 1
                break
    return n


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
) -> EvalResult:
    """Evaluate ``task`` with ``engine``; resume from ``out_dir/<task>/samples.jsonl`` if present."""
    task_dir = out_dir / task.name
    task_dir.mkdir(parents=True, exist_ok=True)
    samples_path, results_path = task_dir / "samples.jsonl", task_dir / "results.json"
    max_new = min(params.max_new_tokens, task.max_new_tokens)
    params = replace(params, max_new_tokens=max_new, min_new_tokens=min(params.min_new_tokens, max_new))
    identity = {"data_hash": task.data_hash(), "generation_config": _params_dict(params), "model": model_id,
                **(model_identity or {})}
    if results_path.exists():
        done = json.loads(results_path.read_text(encoding="utf-8"))
        if done.get("complete") and all(done.get(k) == v for k, v in identity.items()):
            metrics = {k: Estimate(**v) for k, v in done["metrics"].items()}
            return EvalResult(task.name, metrics, done["n_records"], done["unscored"], results_path, reused=True)
        results_path.unlink()

    records = _read_records(samples_path)
    state_path = task_dir / "state.json"
    if records and state_path.exists() and json.loads(state_path.read_text()) != identity:
        records = []  # different model, data or settings: start over
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
    for start in range(0, len(todo), batch_units):
        chunk = todo[start : start + batch_units]
        prompts = [render(u.prompt) for u in chunk]
        rollouts = engine.generate(prompts, params, sample_keys=[u.key for u in chunk])
        new = []
        for r in rollouts:
            unit = chunk[r.prompt_index]
            if (unit.item_id, unit.variant, r.sample_index) in have:
                continue
            response = tokenizer.decode(r.completion_ids, skip_special_tokens=True)
            new.append(_record(task.name, unit, r.sample_index, response, r.truncated, task))
        with samples_path.open("a", encoding="utf-8") as fh:
            for rec in new:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        records.extend(new)
        if progress:
            progress(total - len(todo) + start + len(chunk), total)

    metrics = task.metrics(records)
    unscored = _unscored(records)
    write_json_atomic(
        results_path,
        {
            "eval": task.name,
            "model": model_id,
            "complete": True,
            "n": len(task.units),
            "n_records": len(records),
            "metrics": metrics_to_dict(metrics),
            "unscored": unscored,
            "judges": sorted({f"{r['judge']}@{r['judge_version']}" for r in records}),
            **identity,
            "seed": params.seed,
        },
    )
    return EvalResult(task.name, metrics, len(records), unscored, results_path)


def _record(eval_name: str, unit: Unit, sample: int, response: str, truncated: bool, task: EvalTask) -> dict[str, Any]:
    j = task.score(unit, response)
    return {
        "eval": eval_name,
        "item_id": unit.item_id,
        "variant": unit.variant,
        "split": unit.split,
        "sample": sample,
        "prompt": unit.prompt,
        "response": response,
        "truncated": truncated,
        "parsed": j.parsed,
        "judge": j.judge,
        "judge_version": j.judge_version,
        "scores": j.scores,
        "ok": j.ok,
        "meta": unit.meta,
    }
