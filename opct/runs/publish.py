"""What an exported checkpoint says about itself when it leaves this machine (``opct export``).

* :func:`portable_record`: its ``opct_checkpoint.json`` with no absolute local path in it: a local base
  is named by its folder name (its weights' sha256 still identifies it), the source checkpoint by its
  run's name.
* :func:`run_evaluations`: the run's own eval results, when they exist, as a model card's
  ``model-index`` (Hugging Face's evaluation-results metadata) and Evaluation section. They are read
  from the experiment the run belongs to (``<experiment>/eval/<run name>/``, where ``opct run`` and
  ``opct demo`` write them) and from any ``opct eval`` folder named with ``--eval-results``, and kept
  only when the eval's manifest names the very weights exported (``weights_sha256``). An incomplete
  eval (more unscored records than its limit) and a metric with nothing scored are left out and said.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult

from opct.config import MODEL_ALIASES
from opct.runs.experiment_layout import EvalFolder, ExperimentLayout

#: An eval's headline metrics only: a per-family breakdown (``sycophancy_rate/metadata``) stays in its records.
_BREAKDOWN = "/"


def portable_name(name_or_path: str) -> str:
    """A base model as another machine can read its name: an alias or hub id as is, a local folder
    (an absolute or relative path that exists here) by its folder name."""
    if name_or_path in MODEL_ALIASES:
        return name_or_path
    path = Path(name_or_path).expanduser()
    if path.is_absolute() or path.exists():
        return path.name
    return name_or_path


def portable_record(record: dict[str, Any], source: Path) -> dict[str, Any]:
    """``record`` (a checkpoint's ``opct_checkpoint.json``) with every local path made portable:
    ``base_model`` and ``model.name_or_path`` by :func:`portable_name`, data sources that are local
    files by their file name, and ``source`` (the checkpoint folder) as ``<run name>/<folder name>``."""
    model = dict(record.get("model") or {})
    if model.get("name_or_path"):
        model["name_or_path"] = portable_name(model["name_or_path"])
    data = dict(record.get("data") or {})
    data["sources"] = [portable_name(s) for s in data.get("sources", [])]
    out = {**record, "base_model": portable_name(record["base_model"]), "model": model, "data": data}
    out["exported_from"] = f"{source.resolve().parent.name}/{source.resolve().name}"
    return out


@dataclass
class Evaluations:
    """The run's eval results found for the exported weights: rows for ``model-index`` and the card."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    def eval_results(self) -> list[EvalResult]:
        """These rows as ``huggingface_hub`` ``EvalResult``s, the card's ``model-index`` (empty when there are none)."""
        return [EvalResult(task_type="text-generation", task_name=r["eval"], dataset_type=f"opct/{r['eval']}",
                           dataset_name=f"opct {r['eval']}", metric_type=r["metric"], metric_value=round(r["value"], 4),
                           metric_name=f"{r['metric']} (95% CI [{r['low']:.3f}, {r['high']:.3f}], n={r['n']})")
                for r in self.rows]

    def section(self) -> str | None:
        """The card's Evaluation section body (a table with intervals, n and where it came from), or None."""
        if not self.rows:
            return None
        lines = [f"From the run's own `opct eval` results ({', '.join(f'`{s}`' for s in self.sources)}), on exactly "
                 "these weights (their sha256 matched):", "",
                 "| eval | metric | value | 95% interval | n | unscored |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['eval']} | {r['metric']} | {r['value']:.3f} | [{r['low']:.3f}, {r['high']:.3f}] | {r['n']} | "
                  f"{r['unscored']} |" for r in self.rows]
        if self.left_out:
            lines += ["", "Left out: " + "; ".join(self.left_out) + "."]
        return "\n".join(lines)


def run_eval_folders(run_dir: Path) -> list[Path]:
    """Where an experiment keeps the evals of the run in ``run_dir`` (``<experiment>/train/<name>`` is
    evaluated into ``<experiment>/eval/<name>``); none for a run of its own."""
    experiment = ExperimentLayout.of_run(run_dir.resolve())
    if experiment is None:
        return []
    folder = experiment.eval(run_dir.resolve().name)
    return [folder.root] if folder.manifest.is_file() else []


def run_evaluations(folders: list[Path], weights: str) -> Evaluations:
    """The complete evals of ``folders`` whose manifest measured ``weights`` (the exported weights'
    fingerprint); an eval folder of other weights is said and skipped."""
    found = Evaluations()
    for folder in folders:
        try:
            manifest = json.loads(EvalFolder(folder).manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found.left_out.append(f"{folder.name}: no readable eval manifest")
            continue
        if manifest.get("weights_sha256") != weights:
            found.left_out.append(f"{folder.name}: measured other weights ({manifest.get('weights_sha256')})")
            continue
        found.sources.append(folder.name)
        for results_file in EvalFolder(folder).results_files():
            _add_results(found, json.loads(results_file.read_text(encoding="utf-8")), results_file.parent.name)
    return found


def _add_results(found: Evaluations, results: dict[str, Any], task: str) -> None:
    name = results.get("eval") or task
    if results.get("status", "ok" if results.get("complete") else "incomplete") != "ok":
        found.left_out.append(f"{name}: incomplete ({results.get('unscored', '?')} of {results.get('n_records', '?')} "
                              "records unscored)")
        return
    unscored = results.get("unscored", 0)
    for metric, est in (results.get("metrics") or {}).items():
        value = est.get("value")
        if _BREAKDOWN in metric:
            continue
        if value is None or (isinstance(value, float) and math.isnan(value)) or not est.get("n"):
            found.left_out.append(f"{name} {metric}: nothing scored")
            continue
        found.rows.append({"eval": name, "metric": metric, "value": float(value), "low": float(est["ci_low"]),
                           "high": float(est["ci_high"]), "n": int(est["n"]), "unscored": unscored})
