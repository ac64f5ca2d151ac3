"""An experiment read into memory (:class:`Experiment`): its plan, manifest, results, training and attack
records, and the lookups the report makes in them (a metric, why it is missing, the per-sample records)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from opct.methods import METHODS
from opct.report.json_files import read_json_object, read_jsonl, subdirs
from opct.report.metric import Metric, metric_problem, parse_metric
from opct.runs.experiment_layout import EvalFolder, ExperimentLayout

#: The key of the adaptive attacker's results in :attr:`Experiment.unverified` (its "eval" name).
ATTACK = "<attack>"


@dataclass
class Experiment:
    """Everything the report reads from one experiment directory."""

    root: Path
    plan: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    #: ``results[method][eval]`` is the eval's ``results.json``.
    results: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: ``train[method]`` is the list of per-step records of ``metrics.jsonl``.
    train: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: ``attack[method]`` is the adaptive attacker's ``results.json``.
    attack: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``validation[method]``: the run's validation measurements (``validation.jsonl``, from step 0).
    validation: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: ``diagnostics[method]``: the run's once-per-run measurements (the off-policy profile of its start).
    diagnostics: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The ``selection.json`` the methods' recipes were chosen by, when the experiment names one.
    selection: dict[str, Any] = field(default_factory=dict)
    #: Problems found while reading (unreadable files, incomplete results, ...), for the report.
    warnings: list[str] = field(default_factory=list)
    #: ``unverified[(method, eval)]``: why the eval's ``samples.jsonl`` does not match its ``results.json``
    #: (cut, edited, other counts); a paired difference over those records is marked INCOMPLETE.
    unverified: dict[tuple[str, str], str] = field(default_factory=dict)
    _records: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict, repr=False)
    #: Why the last :meth:`metric` asked for was None although it was planned (``n = 0``, ``INCOMPLETE``,
    #: ``failed: <reason>``); None when it was found or never planned. Read by the results table.
    last_absence: str | None = field(default=None, repr=False)

    @property
    def layout(self) -> ExperimentLayout:
        """Where this experiment's files are."""
        return ExperimentLayout(self.root)

    @property
    def name(self) -> str:
        return str(self.plan.get("name") or self.root.name)

    @property
    def model(self) -> str:
        model = self.plan.get("model") or (self.manifest.get("config") or {}).get("model") or ""
        if isinstance(model, dict):  # a run's manifest holds the model's settings, not its name
            model = model.get("name_or_path") or ""
        return str(model)

    @property
    def methods(self) -> list[str]:
        """The plan's methods, then any other method found on disk, in a stable order."""
        planned = [str(m) for m in self.plan.get("methods", [])]
        found = set(self.results) | set(self.train) | set(self.attack)
        return planned + sorted(found - set(planned), key=_method_sort_key)

    def evals(self) -> list[str]:
        """Every eval name that has results for at least one method."""
        return sorted({e for per_method in self.results.values() for e in per_method})

    def metric(self, method: str, eval_name: str, key: str) -> Metric | None:
        """The metric ``key`` of ``eval_name`` for ``method``, or None when absent or not a number."""
        res = self.results.get(method, {}).get(eval_name, {})
        metric = parse_metric(res.get("metrics", {}).get(key), incomplete=res.get("status") == "incomplete")
        counted = [n for n in (res.get("n_records"), len(self._records.get((method, eval_name), [])) or None)
                   if isinstance(n, int)]  # an n above the records results.json counts, or that samples.jsonl holds
        problem = metric_problem(metric, min(counted) if counted else None)
        if metric is not None and not problem and (method, eval_name) in self.unverified:
            problem = "samples.jsonl does not match: " + self.unverified[(method, eval_name)].rsplit(": ", 1)[-1]
        if problem:
            self._invalid(self.layout.eval(method).results(eval_name), key, problem)
            self.last_absence = f"invalid: {problem}"
            return None
        self.last_absence = None if metric is not None else self.absence(method, eval_name, key)
        return metric

    def _invalid(self, path: Path, key: str, problem: str) -> None:
        """Warn once that metric ``key`` of ``path`` is no measurement (``problem``)."""
        line = f"{path}: {key}: {problem}; it is shown as invalid, not as a result"
        if line not in self.warnings:
            self.warnings.append(line)

    def absence(self, method: str, eval_name: str, key: str) -> str | None:
        """Why ``key`` of ``eval_name`` has no number for ``method`` although the eval was planned or
        started: ``failed: <reason>``, ``INCOMPLETE`` (records without results), ``n = 0`` (nothing scored,
        ``INCOMPLETE`` added when the eval is); None when it was never planned or measured."""
        res = self.results.get(method, {}).get(eval_name)
        if res is None:  # the eval runner writes state.json first, with the error that stopped it
            folder = self.layout.eval(method)
            state_path = folder.state(eval_name)
            state = read_json_object(state_path, []) if state_path.exists() else {}
            if state.get("failed"):
                return f"failed: {state['failed']}"
            return "INCOMPLETE (no results)" if folder.samples(eval_name).exists() else None
        raw = res.get("metrics", {}).get(key)
        if not isinstance(raw, dict):
            return None
        flag = " INCOMPLETE" if res.get("status") == "incomplete" else ""
        if raw.get("n") == 0:
            return f"n = 0{flag}"
        return f"not a number: {raw.get('reason') or 'undefined'}{flag}"

    def attack_metric(self, method: str, key: str) -> Metric | None:
        """The adaptive attacker's metric ``key`` against ``method``, or None; beside its n: the behaviours
        left undecided (unscored), those defended only by degenerate replies, and the degenerate and the
        cut-off replies (which decided nothing: the behaviour's complete attempts did)."""
        res = self.attack.get(method, {})
        metric = parse_metric(res.get("metrics", {}).get(key), incomplete=res.get("status") == "incomplete")
        if problem := metric_problem(metric, None):
            self._invalid(self.layout.attack(method).results, key, problem)
            return None
        counts = res.get("outcomes", {})
        left_out = {"unscored": counts.get("behaviors", {}).get("unscored", 0),
                    "degenerate-only": counts.get("behaviors", {}).get("degenerate", 0),
                    "degenerate replies": counts.get("attempts", {}).get("degenerate", 0),
                    "cut-off replies": counts.get("attempts", {}).get("truncated", 0)}
        if metric is not None and any(left_out.values()):
            metric = replace(metric, unscored={k: v for k, v in left_out.items() if v})
        return metric

    def records(self, method: str, eval_name: str) -> list[dict[str, Any]]:
        """The per-sample records of ``eval_name`` for ``method`` (``samples.jsonl``; empty when absent),
        read once."""
        key = (method, eval_name)
        if key not in self._records:
            path = self.layout.eval(method).samples(eval_name)
            self._records[key] = read_jsonl(path, self.warnings) if path.exists() else []
        return self._records[key]

    def attack_attempts(self, method: str) -> list[dict[str, Any]]:
        """Every query the adaptive attacker made against ``method`` (``attack/<method>/attempts.jsonl``;
        empty when absent)."""
        key = (method, "<attack>")
        if key not in self._records:
            path = self.layout.attack(method).attempts
            self._records[key] = read_jsonl(path, self.warnings) if path.exists() else []
        return self._records[key]

    def sample_evals(self) -> list[str]:
        """Every eval name with results or per-sample records (``samples.jsonl``) for some method, sorted."""
        found = {d.name for m in subdirs(self.layout.evals) for d in subdirs(m) if EvalFolder(m).samples(d.name).is_file()}
        return sorted(found | set(self.evals()))

    def metric_keys(self, eval_name: str) -> list[str]:
        """All metric names of ``eval_name`` over methods, in first-seen order."""
        keys: dict[str, None] = {}
        for per_method in self.results.values():
            keys.update(dict.fromkeys(per_method.get(eval_name, {}).get("metrics", {})))
        return list(keys)


def _method_sort_key(method: str) -> tuple[int, int, str]:
    """Base first, then the registered methods by their card's ``order``, then everything else (a variant,
    a run key, a method with no order) by name."""
    card = METHODS.card(method)
    if method == "base":
        return (0, 0, "")
    return (1, card.order, "") if card is not None and card.order is not None else (2, 0, method)

