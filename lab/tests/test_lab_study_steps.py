"""A study runs a list of steps: the generic study's, the mechanism study's own inserted where they belong, and a
step anyone adds runs in its place and shows its line in the dry run."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from opct_lab.study import runner
from opct_lab.study.config import load_study
from opct_lab.study.mechanism import mechanism_steps
from opct_lab.study.plan import StudyPlan, StudyRun
from opct_lab.study.runner import resolve_study, steps_for
from opct_lab.study.steps import STUDY_STEPS

STUDIES = Path(str(files("opct_lab") / "studies"))


def test_the_generic_study_and_the_mechanism_study_run_their_steps_in_order():
    assert [s.name for s in steps_for(load_study(STUDIES / "organism_demo_full.yaml"))] == [
        "models", "study files", "families", "report"]
    assert [s.name for s in steps_for(load_study(STUDIES / "organism_mechanism.yaml"))] == [
        "level builds", "models", "study files", "level profiles", "families", "kl to base", "report"]
    assert [s.name for s in mechanism_steps(STUDY_STEPS[2:])] == ["families", "kl to base", "report"]


class Note:
    """A toy step: says a line in the plan and records that it ran."""

    name = "note"

    def __init__(self) -> None:
        self.ran: list[str] = []

    def describe(self, plan: StudyPlan) -> str | None:
        return f"then a note on {len(plan.families)} families"

    def run(self, state: StudyRun) -> None:
        self.ran.append(state.study.name)


def test_the_runner_runs_and_describes_whatever_steps_the_study_has(tmp_path, monkeypatch):
    """run_study and the dry run go through the study's list (steps_for), nothing else: a list of one toy step
    runs that step alone, and the plan shows its line after the study's header."""
    note = Note()
    monkeypatch.setattr(runner, "steps_for", lambda study: (note,))
    study = load_study(STUDIES / "organism_demo_full.yaml", [f"output_dir={tmp_path}"])
    assert resolve_study(study).describe().splitlines()[2:] == ["then a note on 3 families"]
    assert runner.run_study(study, show_progress=False, log=lambda line: None) == study.root
    assert note.ran == ["organism-demo-full"] and not study.root.exists()  # no other step wrote anything
