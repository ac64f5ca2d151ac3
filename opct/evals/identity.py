"""What an eval's records and results were measured with (its identity), and why ones on disk are stale."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from opct.evals.contract import EvalTask
from opct.evals.records import read_eval_json, read_records
from opct.runs.experiment_layout import RESULTS_FILE, SAMPLES_FILE, STATE_FILE
from opct.runs.identity import input_changes
from opct.sampling.engine import SamplingParams

#: The version of the rules that assign outcome classes (part of a result's identity: results judged
#: under other rules are recomputed, never reused).
OUTCOME_RULES = "5"  # 5: a capability answer cut off, empty or unparsed is a wrong answer, not an unscored one


def _params_dict(params: SamplingParams) -> dict[str, Any]:
    """The generation settings as an identity records them."""
    out = {"n": params.n, "temperature": params.temperature, "top_p": params.top_p, "max_new_tokens": params.max_new_tokens, "seed": params.seed}
    if params.min_new_tokens:  # recorded only when set, so results written before it existed still match
        out["min_new_tokens"] = params.min_new_tokens
    return out


def task_params(task: EvalTask, params: SamplingParams) -> SamplingParams:
    """``params`` with ``max_new_tokens`` capped at the task's (and ``min_new_tokens`` at that)."""
    max_new = min(params.max_new_tokens, task.max_new_tokens)
    return replace(params, max_new_tokens=max_new, min_new_tokens=min(params.min_new_tokens, max_new))


def task_identity(task: EvalTask, params: SamplingParams, model_id: str, model_identity: dict[str, Any] | None = None,
                  reasoning: str = "strip") -> dict[str, Any]:
    """What a task's records and results were measured with: its data, generation settings (``params``
    as the task caps them), reasoning handling, outcome rules, judge (when the task names one), the
    model as named, and ``model_identity`` (``weights_sha256``, rendering). Records are reused only
    under an equal identity (:func:`same_identity`)."""
    identity = {"data_hash": task.data_hash(), "generation_config": _params_dict(task_params(task, params)),
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


def stale_reason(task_dir: Path, identity: dict[str, Any]) -> str | None:
    """Why the records or results in ``task_dir`` were not measured with ``identity`` (the settings or
    weights that differ), or None when there is nothing there or they were."""
    results_path, samples_path, state_path = task_dir / RESULTS_FILE, task_dir / SAMPLES_FILE, task_dir / STATE_FILE
    if results_path.exists():
        done = read_eval_json(results_path)
        if changes := identity_changes(done, identity):
            return f"{results_path} was measured with other {', '.join(changes)}"
    if read_records(samples_path):
        if not state_path.exists():
            return f"{samples_path} has records whose settings are not recorded ({state_path.name} is missing)"
        if changes := identity_changes(read_eval_json(state_path), identity):
            return f"{samples_path} holds records measured with other {', '.join(changes)}"
    return None

