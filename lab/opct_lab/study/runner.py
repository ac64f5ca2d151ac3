"""Running a study: one experiment per model family, the same methods and seeds in each, then a pooled report.

Layout (:class:`opct_lab.layout.StudyLayout`)::

    <output_dir>/<name>/study.json  manifest.json  report.md  report.json
    <output_dir>/<name>/<family>/   one experiment directory per family (opct.experiments.runner's layout)

A study runs its steps in order (:mod:`opct_lab.study.steps`; the response-diversity study adds its own,
:mod:`opct_lab.study.mechanism`). Each family is an ordinary experiment, run by
:func:`opct.experiments.runner.run_experiment` and resumable as it is: a rerun skips finished training runs
(their manifest must match), continues evaluations and attacks from the records already written, and
rewrites the family's report. The base model is evaluated and attacked once per family (greedy decoding and
a fixed eval/attack seed: nothing in it depends on the training seed). After the families,
:func:`opct_lab.report.study.write_study_report` writes the pooled report (per-family tables, OPCT − BCT
pooled over families and seeds with a verdict per metric); ``opct-lab report <study dir>`` rewrites it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opct.experiments.runner import IncompleteEvalError
from opct_lab.study.config import StudyConfig, chosen_families
from opct_lab.study.mechanism import mechanism_steps
from opct_lab.study.plan import StudyPlan, StudyRun, StudyStep, resolve_families
from opct_lab.study.steps import STUDY_STEPS


def steps_for(study: StudyConfig) -> tuple[StudyStep, ...]:
    """The steps a study runs: the response-diversity study's (a study with ``levels``) or the generic ones."""
    return mechanism_steps(STUDY_STEPS) if study.levels else STUDY_STEPS


def resolve_study(study: StudyConfig) -> StudyPlan:
    """The study's plan: every family's experiment resolved (validated run configs, models to evaluate), and its steps."""
    return StudyPlan(study, resolve_families(study), steps_for(study))


def run_study(study: StudyConfig, show_progress: bool = True, log: Any = print, jobs: int = 1,
              only: list[str] | None = None) -> Path:
    """Run (or resume) the study's steps: every family's experiment, then the pooled report; returns the study folder.

    A family whose evals are incomplete does not stop the others: the report is written with what
    there is, and :class:`IncompleteEvalError` is raised at the end naming every such family (unless
    ``eval.allow_unscored``, as in an experiment). ``jobs``: each family's stages at a time (``opct-lab run --jobs``).
    ``only``: run these families alone (``opct-lab run --family``; a long study a family at a time); each family's
    own report is written, the pooled report is not (it waits for a run of every family, which then resumes the
    finished ones)."""
    plan = resolve_study(study)
    state = StudyRun(study, plan, chosen_families(study, only), log=log, show_progress=show_progress, jobs=jobs)
    for step in plan.steps:
        step.run(state)
    if state.unfinished:
        raise IncompleteEvalError("\n".join(state.unfinished))
    return study.root
