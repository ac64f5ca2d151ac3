"""Where everything is inside a study's folder and a recipe selection's: the one module of the lab that names
their files (``tests/test_lab_architecture.py`` holds the lab to it, as the library's test holds ``opct``
to :mod:`opct.runs.experiment_layout`).

::

    <study>/       study.json  manifest.json  report.md  report.json  dose_response.png
      <family>/                        one experiment folder per family (:class:`opct.runs.experiment_layout.ExperimentLayout`)
      profiles/<family>.json           a study with levels: each family's base-organism profile (the dose)
    <selection>/   selection.json  manifest.json
      runs/<candidate>-s<seed>/        each candidate's training run
      configs/<candidate>-s<seed>.yaml its run configuration

A study's and a selection's top files (``manifest.json``, ``report.md``...) are an experiment folder's, so
both layouts extend :class:`~opct.runs.experiment_layout.ExperimentLayout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from opct.runs.experiment_layout import ExperimentLayout

#: The file that marks a folder as a study: its families and their experiments (``opct-lab report`` reads it).
STUDY_FILE = "study.json"


@dataclass(frozen=True)
class StudyLayout(ExperimentLayout):
    """The paths of one study folder; nothing is created or read here."""

    @property
    def study(self) -> Path:
        """``study.json``: the study's families and their experiments."""
        return self.root / STUDY_FILE

    def family(self, name: str) -> ExperimentLayout:
        """``<family>/``: the study's experiment for one model family."""
        return ExperimentLayout(self.root / name)

    def is_study(self) -> bool:
        """Whether the folder holds a study (its :data:`STUDY_FILE`)."""
        return self.study.is_file()


@dataclass(frozen=True)
class SelectionLayout(ExperimentLayout):
    """The paths of one recipe selection's folder (its ``selection.json`` is :attr:`selection`)."""

    def family(self, name: str) -> SelectionLayout:
        """``<family>/``: a per-family selection's folder (``opct-lab select --per-family``)."""
        return SelectionLayout(self.root / name)

    @property
    def candidate_runs(self) -> Path:
        """``runs/``: the candidates' training runs."""
        return self.root / "runs"

    @property
    def candidate_configs(self) -> Path:
        """``configs/``: the candidates' run configurations."""
        return self.root / "configs"

    def candidate_config(self, run_name: str) -> Path:
        """``configs/<run>.yaml``: one candidate run's configuration."""
        return self.candidate_configs / f"{run_name}.yaml"
