"""Read an experiment directory into memory: plan, manifest, eval results, training and attack metrics.

The layout (written by ``opct experiment``)::

    <exp>/plan.json  manifest.json
    <exp>/eval/<method>/<eval>/results.json
    <exp>/train/<method>/metrics.jsonl
    <exp>/attack/<method>/results.json

Every file is optional: the report shows what is there, why a planned number is missing (``n = 0``,
``INCOMPLETE``, ``failed: <reason>``: :meth:`Experiment.absence`) and "—" for the rest. ``results.json``
files written before ``status`` was their one flag (``complete: true`` beside it) are read as well.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from opct.methods import METHODS
from opct.runs.experiment_layout import AttackFolder, EvalFolder, ExperimentLayout
from opct.runs.layout import RunLayout

#: The key of the adaptive attacker's results in :attr:`Experiment.unverified` (its "eval" name).
ATTACK = "<attack>"



def json_number(x: float | None) -> float | None:
    """``x`` for ``report.json`` (strict JSON): ``None`` for a missing, NaN or infinite number."""
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class Metric:
    """One reported number: value with optional 95% interval and denominator."""

    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    #: Records (or behaviours) left out of ``n`` by outcome class, e.g. ``{"empty": 3}``.
    unscored: dict[str, int] = field(default_factory=dict)
    #: The eval (or attack) it comes from has more unscored records than its limit allows.
    incomplete: bool = False
    #: Records kept in ``n`` as failures, by outcome class (capability: ``{"truncated": 22}`` answers wrong).
    counted_wrong: dict[str, int] = field(default_factory=dict)

    @property
    def has_interval(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None

    def to_dict(self) -> dict[str, Any]:
        """The metric as strict JSON (a NaN is ``None``), as ``report.json`` holds it."""
        return {"value": json_number(self.value), "ci_low": json_number(self.ci_low), "ci_high": json_number(self.ci_high),
                "n": self.n, "unscored": dict(self.unscored), "incomplete": self.incomplete,
                **({"counted_wrong": dict(self.counted_wrong)} if self.counted_wrong else {})}


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
            state = _read_json(state_path, []) if state_path.exists() else {}
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
        found = {d.name for m in _subdirs(self.layout.evals) for d in _subdirs(m) if EvalFolder(m).samples(d.name).is_file()}
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


def _finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


def parse_metric(raw: Any, incomplete: bool = False) -> Metric | None:
    """A metric from a ``{value, ci_low, ci_high, n, unscored, counted_wrong}`` record or a bare number; None
    when not finite."""
    if isinstance(raw, dict):
        value = _finite(raw.get("value"))
        if value is None:
            return None
        lo, hi = _finite(raw.get("ci_low")), _finite(raw.get("ci_high"))
        if lo is None or hi is None:
            lo = hi = None
        n = raw.get("n")
        unscored = raw.get("unscored") if isinstance(raw.get("unscored"), dict) else {}
        wrong = raw.get("counted_wrong") if isinstance(raw.get("counted_wrong"), dict) else {}
        return Metric(value, lo, hi, int(n) if isinstance(n, int | float) and not isinstance(n, bool) else None,
                      {str(k): int(v) for k, v in unscored.items() if v}, incomplete,
                      {str(k): int(v) for k, v in wrong.items() if v})
    value = _finite(raw)
    return Metric(value, incomplete=incomplete) if value is not None else None


#: Slack for a value on its own interval's bound, written through JSON's decimal floats.
_TOLERANCE = 1e-9


def metric_problem(metric: Metric | None, n_records: int | None) -> str | None:
    """Why ``metric`` cannot be a measurement, or None: every eval and attack metric is a share or an
    area in [0, 1], lies inside its own interval, and counts at most the eval's ``n_records`` records."""
    if metric is None:
        return None

    def inside(x: float) -> bool:
        return -_TOLERANCE <= x <= 1 + _TOLERANCE

    if not inside(metric.value):
        return f"value {metric.value:g} outside [0, 1]"
    if metric.has_interval:
        lo, hi = float(metric.ci_low or 0.0), float(metric.ci_high or 0.0)
        if not (inside(lo) and inside(hi)):
            return f"interval [{lo:g}, {hi:g}] outside [0, 1]"
        if not lo - _TOLERANCE <= metric.value <= hi + _TOLERANCE:
            return f"value {metric.value:g} outside its own interval [{lo:g}, {hi:g}]"
    if metric.n is not None and (metric.n < 0 or (n_records is not None and metric.n > n_records)):
        return f"n={metric.n} does not fit the {n_records} record(s) results.json counts"
    return None


def _read_json(path: Path, warnings: list[str]) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        warnings.append(f"could not read {path}: {err}")
        return {}
    if not isinstance(data, dict):
        warnings.append(f"{path} is not a JSON object")
        return {}
    return data


def read_jsonl(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    """JSON objects, one a line; bad lines (e.g. a half-written last line) are skipped and counted."""
    rows, bad = read_jsonl_counted(path)
    if bad:
        warnings.append(f"{path}: skipped {bad} unreadable line(s)")
    return rows


def read_jsonl_counted(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of ``path``, one a line, and how many lines were not one."""
    rows, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


def _subdirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir()) if path.is_dir() else []


def load_experiment(root: str | Path) -> Experiment:
    """Read ``root`` (an experiment directory); raises FileNotFoundError when it does not exist."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no experiment directory at {root}")
    exp = Experiment(root)
    layout = exp.layout
    for name, path in (("plan", layout.plan), ("manifest", layout.manifest)):
        if path.exists():
            setattr(exp, name, _read_json(path, exp.warnings))
    for method_dir in _subdirs(layout.evals):
        for eval_dir in _subdirs(method_dir):
            path = EvalFolder(method_dir).results(eval_dir.name)
            if not path.exists():
                continue
            data = _read_json(path, exp.warnings)
            if data:
                exp.results.setdefault(method_dir.name, {})[eval_dir.name] = data
                _check_results(path, data, exp.warnings)
                _verify_samples(exp, method_dir.name, eval_dir.name, data)
                for key in data.get("metrics") or {}:  # an impossible number is warned about now, not when drawn
                    exp.metric(method_dir.name, eval_dir.name, key)
    for method_dir in _subdirs(layout.train):
        run = RunLayout(method_dir)
        if run.metrics.exists():
            exp.train[method_dir.name] = read_jsonl(run.metrics, exp.warnings)
        if run.validation.exists():
            exp.validation[method_dir.name] = read_jsonl(run.validation, exp.warnings)
        if run.diagnostics.exists() and (data := _read_json(run.diagnostics, exp.warnings)):
            exp.diagnostics[method_dir.name] = data
    if layout.selection.exists():
        exp.selection = _read_json(layout.selection, exp.warnings) or {}
    for method_dir in _subdirs(layout.attacks):
        path = AttackFolder(method_dir).results
        if path.exists() and (data := _read_json(path, exp.warnings)):
            exp.attack[method_dir.name] = data
            for key in data.get("metrics") or {}:
                exp.attack_metric(method_dir.name, key)
            behaviors, n = data.get("behaviors"), data.get("n")
            if isinstance(behaviors, list) and isinstance(n, int) and len(behaviors) != n:
                exp.unverified[(method_dir.name, ATTACK)] = f"{path}: {len(behaviors)} behaviour(s) listed where n is {n}"
                exp.warnings.append(f"{path} lists {len(behaviors)} behaviour(s) where its n is {n}: the paired "
                                    "differences over them are marked INCOMPLETE")
            if data.get("status") == "incomplete":
                exp.warnings.append(f"{path}: INCOMPLETE: {data.get('outcomes')}; its defense rate is not a measurement")
    return exp


def samples_sha256(path: Path) -> str:
    """The sha256 of a ``samples.jsonl`` as its bytes are (``results.json`` records it as ``samples_sha256``)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _verify_samples(exp: Experiment, method: str, eval_name: str, data: dict[str, Any]) -> None:
    """Check an eval's ``samples.jsonl`` against its ``results.json``: every line readable, as many records
    as ``n_records``, the same bytes as ``samples_sha256`` (when recorded). A mismatch is a warning naming
    both files, and the records are marked unverified (:attr:`Experiment.unverified`)."""
    path = exp.layout.eval(method).samples(eval_name)
    if not path.is_file():
        return
    rows, bad = read_jsonl_counted(path)
    exp._records[(method, eval_name)] = rows
    problems = [f"{bad} unreadable line(s)"] if bad else []
    expected = data.get("n_records")
    if isinstance(expected, int) and not isinstance(expected, bool) and len(rows) != expected:
        problems.append(f"{len(rows)} readable record(s) where results.json counts {expected}")
    recorded = data.get("samples_sha256")
    if isinstance(recorded, str) and recorded != samples_sha256(path):
        problems.append("its sha256 differs from the one results.json recorded")
    if problems:
        reason = "; ".join(problems)
        exp.unverified[(method, eval_name)] = f"{path}: {reason}"
        exp.warnings.append(f"{path} does not match its results.json ({reason}): the paired differences over it are "
                            "marked INCOMPLETE, and samples.html shows only the records it could read")


def _check_results(path: Path, data: dict[str, Any], warnings: list[str]) -> None:
    if data.get("complete") is False:  # results.json held "complete" beside "status" before status was its one flag
        warnings.append(f"{path}: results are marked incomplete")
    unscored = data.get("unscored")
    if data.get("status") == "incomplete":
        warnings.append(f"{path}: INCOMPLETE: {unscored} of {data.get('n_records')} record(s) unscored "
                        f"({data.get('outcomes')}), over the {data.get('max_unscored')} limit; its numbers are not a measurement")
    elif isinstance(unscored, int) and unscored > 0:
        warnings.append(f"{path}: {unscored} record(s) could not be scored")
