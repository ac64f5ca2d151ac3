"""A selection candidate's measurements, verified before they may decide a pick.

``opct-lab select`` picks recipes from the candidates' ``validation.jsonl`` records. A record it cannot trust
stops the selection, naming the candidate's file, line and field and how to train the candidate again;
a damaged candidate is never picked:

* every line must be a JSON object with its ``step`` (a line cut by a kill, or edited into something
  else, is refused: the run counts as finished, but its record is not whole);
* every value must lie in its range: ``val_teacher_kl`` (a KL divergence) and ``val_entropy`` finite and
  not below 0, each rate (``val_good``, ``famval_good``, ``val_truncation_rate``, ``val_cap/<task>``) in
  [0, 1]; a value not measured (``null``, NaN) is left to the rules, which never pick on it;
* each record after step 0 must equal the ``val_*`` values training wrote beside it into the run's
  ``metrics.jsonl`` at that step, so an edit to one file alone is found.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from opct.errors import OpctError
from opct.runs.layout import RunLayout

#: Below 0 by no more than this is float rounding of a KL or an entropy, not a damaged value.
_ROUNDING = 1e-6
#: The fields that are rates, whatever their task suffix.
_RATES = ("val_good", "famval_good", "val_truncation_rate")


class CandidateDamagedError(OpctError, ValueError):
    """A selection candidate's records are cut, out of range or disagree with its run's own log."""


def candidate_records(run_dir: Path, candidate: str) -> dict[int, dict[str, Any]]:
    """The validation records of the candidate's run in ``run_dir`` by step, each checked (the module's
    rules); :class:`CandidateDamagedError` names the file, line and field of the first that fails."""
    layout = RunLayout(run_dir)
    path = layout.validation
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `opct-lab select` on the selection file to train the candidates first")
    remedy = f"delete {run_dir} and rerun `opct-lab select` on the selection file to train candidate {candidate} again"
    logged = _logged_values(layout.metrics)
    records: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"candidate {candidate}: {path}, line {number}"
        try:
            record = json.loads(line)
        except ValueError:
            raise CandidateDamagedError(f"{where} is not JSON (cut or edited); it cannot decide a pick: {remedy}") from None
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise CandidateDamagedError(f"{where} is not a validation record (no step); {remedy}")
        if problem := _out_of_range(record):
            raise CandidateDamagedError(f"{where}: {problem}; it cannot decide a pick: {remedy}")
        for key, value in logged.get(record["step"], {}).items():
            if key in record and not _same(record[key], value):
                raise CandidateDamagedError(f"{where}: {key} is {record[key]!r}, but the run's {layout.metrics.name} "
                                            f"recorded {value!r} at step {record['step']}: one was edited; {remedy}")
        records[record["step"]] = record
    return records


def _out_of_range(record: dict[str, Any]) -> str | None:
    """Why a value of ``record`` cannot be a measurement, or None."""
    for key, value in record.items():
        if key == "step" or value is None or isinstance(value, bool) or not key.startswith(("val_", "famval_")):
            continue
        if not isinstance(value, int | float):
            continue
        if math.isnan(value):
            continue  # not measured: the rules never pick on it
        if math.isinf(value):
            return f"{key} is {value}, not a finite number"
        if key.startswith("val_cap/") or key in _RATES:
            if not -_ROUNDING <= value <= 1 + _ROUNDING:
                return f"{key} is {value:g}, outside [0, 1] (a rate)"
        elif key in ("val_teacher_kl", "val_entropy") and value < -_ROUNDING:
            return f"{key} is {value:g}, below 0 (a divergence or an entropy never is)"
    return None


def _logged_values(metrics: Path) -> dict[int, dict[str, Any]]:
    """The ``val_*`` values of each step's ``metrics.jsonl`` record (unreadable lines are skipped: the run's
    own log is a second witness, not the record checked)."""
    if not metrics.is_file():
        return {}
    out: dict[int, dict[str, Any]] = {}
    for line in metrics.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
            out[record["step"]] = {k: v for k, v in record.items() if k.startswith(("val_", "famval_"))}
    return out


def _same(a: Any, b: Any) -> bool:
    """Whether two logged values are one measurement (numbers within float rounding; NaN, and null, the way
    strict JSON writes it, are one "not measured")."""
    a, b = (math.nan if v is None else v for v in (a, b))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b
