"""Where everything is inside an experiment's folder: the one place in the library that names its files, and
those of the eval and attack folders in it (a study's and a recipe selection's folders are the lab's,
``opct_lab.layout``, built on this one).

::

    <experiment>/
      plan.json  manifest.json        what was planned (every run's settings, the models) and run
      selection.json                  the recipe selection the methods' settings were chosen by (evidence)
      train/<key>/                    each trained run (a run directory: :class:`opct.runs.layout.RunLayout`)
      replaced/<key>-<n>/             runs trained again from scratch, kept
      eval/<model>/                   an eval folder per model (:class:`EvalFolder`):
        <eval>/results.json  samples.jsonl  state.json
      attack/<model>/                 an attack folder per model (:class:`AttackFolder`):
        results.json  attempts.jsonl  successes.jsonl  manifest.json
      report.html  report.md  report.json  samples.html  figures/
      stages/                         ``opct run --jobs N``: the settings its workers read (settings.json) and,
        <kind>-<key>.log  .json       per stage, its worker's output and its incomplete evals

Every other module asks these objects (or the file-name constants below) for a path instead of joining
names onto a folder; ``tests/test_architecture.py`` holds them to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: An eval's or an attack's results, written last (their presence means finished).
RESULTS_FILE = "results.json"
#: An eval's per-sample records, one JSON line per judged sample.
SAMPLES_FILE = "samples.jsonl"
#: An eval's inputs (its identity) and the error that stopped it, written before its first record.
STATE_FILE = "state.json"
#: Every query an attack made, and every cracking prompt.
ATTEMPTS_FILE, SUCCESSES_FILE = "attempts.jsonl", "successes.jsonl"
#: A recipe selection's outcome (an experiment's copy of it as evidence).
SELECTION_FILE = "selection.json"
#: The report's files (:func:`opct.report.write_report`).
REPORT_HTML, REPORT_MD, REPORT_JSON, SAMPLES_HTML, FIGURES = "report.html", "report.md", "report.json", "samples.html", "figures"
_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class EvalFolder:
    """An eval output folder (``opct eval --out``, or an experiment's ``eval/<model>/``): one folder per eval."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def manifest(self) -> Path:
        return self.root / _MANIFEST

    def task(self, eval_name: str) -> Path:
        """``<eval>/``: the folder of one eval's records and results."""
        return self.root / eval_name

    def results(self, eval_name: str) -> Path:
        return self.task(eval_name) / RESULTS_FILE

    def samples(self, eval_name: str) -> Path:
        return self.task(eval_name) / SAMPLES_FILE

    def state(self, eval_name: str) -> Path:
        return self.task(eval_name) / STATE_FILE

    def results_files(self) -> list[Path]:
        """Every ``<eval>/results.json`` there, sorted."""
        return sorted(self.root.glob(f"*/{RESULTS_FILE}"))

    def holds_eval(self, folder: Path) -> bool:
        """Whether ``folder`` (inside this one) holds an eval's records, results or state."""
        return folder.is_dir() and any((folder / name).exists() for name in (SAMPLES_FILE, RESULTS_FILE, STATE_FILE))


@dataclass(frozen=True)
class AttackFolder:
    """An attack output folder (``opct attack --out``, or an experiment's ``attack/<model>/``)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def manifest(self) -> Path:
        return self.root / _MANIFEST

    @property
    def results(self) -> Path:
        return self.root / RESULTS_FILE

    @property
    def attempts(self) -> Path:
        return self.root / ATTEMPTS_FILE

    @property
    def successes(self) -> Path:
        return self.root / SUCCESSES_FILE


@dataclass(frozen=True)
class ExperimentLayout:
    """The paths of one experiment folder (the lab's study and selection layouts extend it: they share its top
    files); nothing is created or read here."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def of_run(cls, run_dir: Path) -> ExperimentLayout | None:
        """The experiment whose ``train/<key>/`` ``run_dir`` is, or None for a run of its own."""
        run_dir = Path(run_dir)
        root = run_dir.parent.parent
        return cls(root) if cls(root).run(run_dir.name) == run_dir else None

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def manifest(self) -> Path:
        return self.root / _MANIFEST

    @property
    def selection(self) -> Path:
        return self.root / SELECTION_FILE

    @property
    def train(self) -> Path:
        """``train/``: the folder of the experiment's run directories."""
        return self.root / "train"

    def run(self, key: str) -> Path:
        """``train/<key>/``: the run directory of one row of the plan."""
        return self.train / key

    @property
    def replaced(self) -> Path:
        """``replaced/``: where runs trained again from scratch are kept."""
        return self.root / "replaced"

    @property
    def evals(self) -> Path:
        """``eval/``: one eval folder per model."""
        return self.root / "eval"

    def eval(self, model: str) -> EvalFolder:
        """``eval/<model>/``."""
        return EvalFolder(self.evals / model)

    @property
    def attacks(self) -> Path:
        """``attack/``: one attack folder per model."""
        return self.root / "attack"

    def attack(self, model: str) -> AttackFolder:
        """``attack/<model>/``."""
        return AttackFolder(self.attacks / model)

    @property
    def per_model(self) -> tuple[Path, Path, Path]:
        """``train/``, ``eval/`` and ``attack/``: the folders that hold one folder per model of the plan."""
        return self.train, self.evals, self.attacks

    @property
    def stages(self) -> Path:
        """``stages/``: what ``opct run --jobs N`` hands its worker processes, and what they leave."""
        return self.root / "stages"

    @property
    def worker_settings(self) -> Path:
        """``stages/settings.json``: the experiment's resolved settings, as every worker reads them."""
        return self.stages / "settings.json"

    def stage_log(self, stage: str) -> Path:
        """``stages/<kind>-<key>.log``: the output (stdout and stderr) of the worker that ran ``stage`` (``train:opct``)."""
        return self.stages / f"{stage.replace(':', '-')}.log"

    def stage_outcome(self, stage: str) -> Path:
        """``stages/<kind>-<key>.json``: a finished stage's incomplete evals, for the experiment's process."""
        return self.stages / f"{stage.replace(':', '-')}.json"

    @property
    def report_html(self) -> Path:
        return self.root / REPORT_HTML

    @property
    def report_md(self) -> Path:
        return self.root / REPORT_MD

    @property
    def report_json(self) -> Path:
        return self.root / REPORT_JSON

    @property
    def samples_html(self) -> Path:
        return self.root / SAMPLES_HTML

    @property
    def figures(self) -> Path:
        return self.root / FIGURES
