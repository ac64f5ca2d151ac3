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
from pathlib import Path
from typing import Any

from opct.report.experiment import ATTACK, Experiment
from opct.report.json_files import read_json_object, read_jsonl, read_jsonl_counted, subdirs
from opct.runs.experiment_layout import AttackFolder, EvalFolder
from opct.runs.layout import RunLayout


def load_experiment(root: str | Path) -> Experiment:
    """Read ``root`` (an experiment directory); raises FileNotFoundError when it does not exist."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no experiment directory at {root}")
    exp = Experiment(root)
    layout = exp.layout
    for name, path in (("plan", layout.plan), ("manifest", layout.manifest)):
        if path.exists():
            setattr(exp, name, read_json_object(path, exp.warnings))
    for method_dir in subdirs(layout.evals):
        for eval_dir in subdirs(method_dir):
            path = EvalFolder(method_dir).results(eval_dir.name)
            if not path.exists():
                continue
            data = read_json_object(path, exp.warnings)
            if data:
                exp.results.setdefault(method_dir.name, {})[eval_dir.name] = data
                _check_results(path, data, exp.warnings)
                _verify_samples(exp, method_dir.name, eval_dir.name, data)
                for key in data.get("metrics") or {}:  # an impossible number is warned about now, not when drawn
                    exp.metric(method_dir.name, eval_dir.name, key)
    for method_dir in subdirs(layout.train):
        run = RunLayout(method_dir)
        if run.metrics.exists():
            exp.train[method_dir.name] = read_jsonl(run.metrics, exp.warnings)
        if run.validation.exists():
            exp.validation[method_dir.name] = read_jsonl(run.validation, exp.warnings)
        if run.diagnostics.exists() and (data := read_json_object(run.diagnostics, exp.warnings)):
            exp.diagnostics[method_dir.name] = data
    if layout.selection.exists():
        exp.selection = read_json_object(layout.selection, exp.warnings) or {}
    for method_dir in subdirs(layout.attacks):
        path = AttackFolder(method_dir).results
        if path.exists() and (data := read_json_object(path, exp.warnings)):
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
