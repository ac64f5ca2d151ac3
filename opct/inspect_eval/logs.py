"""Read Inspect logs of opct's tasks back into opct's results: the same records, metrics and status.

A log holds one record per sample and epoch in its scores' metadata (:mod:`opct.inspect_eval.bridge`).
The eval tasks are rebuilt from the log's task name and arguments, and their metrics recomputed over
the records, so an Inspect run is reported exactly as ``opct eval`` reports its own. A sample that
failed, and one the log does not have (an interrupted run), becomes an ``error`` record: unscored,
counted, never a result.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from opct.errors import OpctError
from opct.evals.outcomes import ERROR
from opct.evals.records import EvalResult, result_from_records
from opct.evals.suite import incomplete, results_table
from opct.inspect_eval.tasks import built_tasks

#: Suffixes of Inspect log files.
LOG_SUFFIXES = (".eval", ".json")


class InspectLogError(OpctError, ValueError):
    """An Inspect log that is not a log of one of opct's tasks."""


def is_inspect_log_path(path: Path) -> bool:
    """Whether ``path`` is an Inspect log file, or a folder holding them (experiments never do)."""
    if path.is_file():
        # an Inspect JSON log has an "eval" object (opct's own results.json has an "eval" name)
        head = path.read_text(encoding="utf-8", errors="replace")[:4096] if path.suffix == ".json" else ""
        return path.suffix == ".eval" or re.search(r'"eval"\s*:\s*\{', head) is not None
    return path.is_dir() and any(path.glob("*.eval"))


def log_files(path: Path) -> list[Path]:
    """The log files at ``path`` (a file, or every ``*.eval`` of a folder, oldest first)."""
    return [path] if path.is_file() else sorted(path.glob("*.eval"))


def _evaluated_ids(log: Any) -> set[str] | None:
    """The ids of the samples the run set out to evaluate (``--limit`` and ``--sample-id`` leave the
    others out); ``None`` when the log does not say, and every unit is expected."""
    ids = getattr(log.eval.dataset, "sample_ids", None)
    return None if ids is None else {str(i) for i in ids}


def _missing_record(task: str, unit: dict[str, Any], epoch: int, why: str) -> dict[str, Any]:
    """The record of a sample without a score: outcome ``error`` (unscored), with the reason."""
    return {"eval": task, "item_id": unit["item_id"], "variant": unit["variant"], "split": unit.get("split", ""),
            "sample": epoch - 1, "outcome": ERROR, "parsed": None, "scores": {}, "ok": False, "error": why,
            "meta": unit.get("meta", {})}


def read_results(path: str | Path) -> tuple[dict[str, Any], dict[str, EvalResult]]:
    """``(header, {eval: EvalResult})`` of one Inspect log of an opct task: the model, task and status of
    the run, and each eval's metrics recomputed from its records."""
    from inspect_ai.log import read_eval_log

    path = Path(path)
    log = read_eval_log(str(path))
    registry_name = getattr(log.eval, "task_registry_name", None) or log.eval.task
    if not str(registry_name).startswith("opct/"):
        raise InspectLogError(f"{path}: task {registry_name!r} is not one of opct's (opct/<axis>); "
                              "only logs of opct's Inspect tasks can be reported")
    tasks = built_tasks(str(registry_name), log.eval.task_args)
    evaluated = _evaluated_ids(log)
    epochs = log.eval.config.epochs or 1
    seen: set[tuple[str, int]] = set()
    records: dict[str, list[dict[str, Any]]] = {name: [] for name in tasks}
    for sample in log.samples or []:
        seen.add((str(sample.id), sample.epoch))
        score = next((s for s in (sample.scores or {}).values() if s.metadata and "opct_record" in s.metadata), None)
        if score is not None:
            rec = score.metadata["opct_record"]
            records[rec["eval"]].append(rec)
        else:
            why = f"sample failed: {sample.error.message}" if sample.error else "sample has no score"
            task = sample.metadata["opct_eval"]
            records[task].append(_missing_record(task, sample.metadata["opct_unit"], sample.epoch, why))
    for name, task in tasks.items():
        for unit in task.units:
            if evaluated is not None and f"{name}|{unit.key}" not in evaluated:
                continue  # left out by --limit or --sample-id: not part of this run
            for epoch in range(1, epochs + 1):
                if (f"{name}|{unit.key}", epoch) not in seen:
                    records[name].append(_missing_record(name, unit.to_dict(), epoch, "not in the log"))
    max_unscored = float(log.eval.task_args.get("max_unscored", 0.05))
    results = {name: result_from_records(task, records[name], path, max_unscored) for name, task in tasks.items()}
    header = {"log": str(path), "task": registry_name, "model": log.eval.model, "status": log.status,
              "epochs": epochs, "task_args": dict(log.eval.task_args),
              "task_args_given": dict(getattr(log.eval, "task_args_passed", None) or {})}
    return header, results


def report_renderables(path: Path) -> list[Any]:
    """What ``opct report <Inspect logs>`` prints: per log, its model, task and arguments given, opct's
    results table (value, 95% interval, n, unscored), and the evals that are incomplete."""
    from rich.text import Text


    out: list[Any] = []
    for file in log_files(path):
        header, results = read_results(file)
        given = ", ".join(f"{k}={v}" for k, v in header["task_args_given"].items())
        out.append(Text(f"{header['task']} on {header['model']} ({header['status']}; epochs {header['epochs']}): {file}"))
        if given:
            out.append(Text(f"  task args: {given}"))
        out.append(results_table(results, title=str(header["task"])))
        out.extend(Text(f"INCOMPLETE {line}", style="bold red") for line in incomplete(results))
    return out
