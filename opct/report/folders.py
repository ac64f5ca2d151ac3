"""Where ``opct report`` may read and write: an experiment folder it reads, and the folder it writes into.

A report is written only where opct owns the folder: the experiment folder itself (``manifest.json`` of
kind ``experiment``, written by ``opct run``), or a ``--out`` folder that is new, empty, or an earlier
report's (its ``manifest.json`` of kind ``report``). A training run, an eval, another command's output,
a folder of someone else's files and an empty folder are refused, naming what was found, before
anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

from opct.errors import OpctError
from opct.runs.atomic import write_json_atomic
from opct.runs.experiment_layout import REPORT_HTML, REPORT_MD, SAMPLES_HTML, ExperimentLayout
from opct.runs.layout import RunLayout
from opct.runs.outputs import listing, output_owner

#: The files ``opct report`` writes into its folder (and ``figures/``).
REPORT_FILES = (REPORT_HTML, REPORT_MD, SAMPLES_HTML)


class ReportFolderError(OpctError, ValueError):
    """``opct report`` was given a folder that is not an experiment, or a ``--out`` it does not own."""


def _is_experiment_plan(path: Path) -> bool:
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(plan, dict) and isinstance(plan.get("methods"), list)


def check_experiment_folder(folder: Path) -> None:
    """Raise :class:`ReportFolderError` unless ``folder`` is an experiment folder: its ``manifest.json``
    says ``kind: experiment``, or (a manifest cut or not written yet) its ``plan.json`` is an experiment's plan."""
    if not folder.is_dir():
        raise ReportFolderError(f"no experiment directory at {folder}: give an experiment folder "
                                "(runs/experiments/<name>, written by opct run).")
    owner = output_owner(folder)
    if owner is not None and owner.kind == "experiment":
        return
    if (owner is None or owner.kind == "unknown") and _is_experiment_plan(ExperimentLayout(folder).plan):
        return  # the manifest is cut (load_experiment warns) or was never written
    if owner is not None and owner.kind != "unknown":
        raise ReportFolderError(f"{folder} is {owner.describe()}, not an experiment: opct report reads an experiment "
                                "folder (runs/experiments/<name>, written by opct run) and writes nothing elsewhere.")
    if not any(folder.iterdir()):
        raise ReportFolderError(f"{folder} is empty: not an experiment (an experiment folder holds the plan.json and "
                                "manifest.json opct run writes). Nothing was written.")
    raise ReportFolderError(f"{folder} is not an experiment: it holds files opct did not write ({listing(folder)}); "
                            "opct report writes only into an experiment folder or a new --out, so nothing was written.")


def check_report_out(out: Path) -> None:
    """Raise :class:`ReportFolderError` unless ``out`` may receive a report: absent, empty, or an earlier
    report's folder (written by ``opct report --out``)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ReportFolderError(f"--out {out} is a file; give a new folder for the report.")
    owner = output_owner(out)
    if owner is not None and owner.kind == "report":
        return
    if owner is not None:
        raise ReportFolderError(f"--out {out} belongs to {owner.describe()}; a report never writes into it. "
                                "Give a new folder.")
    if any(out.iterdir()):
        raise ReportFolderError(f"--out {out} already holds files opct did not write ({listing(out)}); a report "
                                "never replaces them. Give a new or empty folder.")


def mark_report_out(out: Path, experiment: Path) -> None:
    """Mark ``out`` as a report's folder (``manifest.json``, kind ``report``), so that a rerun may rewrite it."""
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(RunLayout(out).manifest, {"kind": "report", "experiment": str(experiment.resolve())})
