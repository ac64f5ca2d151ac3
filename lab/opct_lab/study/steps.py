"""A study as a list of steps: what :func:`opct_lab.study.runner.run_study` runs, in order, and what the dry run
says of each.

A step is a :class:`~opct_lab.study.plan.StudyStep`: a ``name``, ``describe(plan)`` (its line in ``--dry-run``'s
plan, or ``None``) and ``run(state)`` (state: the :class:`~opct_lab.study.plan.StudyRun` the steps share). The generic study is :data:`STUDY_STEPS`: check that every family's model resolves, write
``study.json`` and the manifest, run every family's experiment, write the pooled report. A study adds its
own steps where they belong (:func:`opct_lab.study.mechanism.mechanism_steps` adds the level builds, their
profiles and each run's KL to the base); :func:`opct_lab.study.runner.steps_for` picks a study's list.
"""

from __future__ import annotations

from opct.experiments.runner import IncompleteEvalError, run_experiment
from opct.runs.atomic import write_json_atomic
from opct.runs.manifest import build_manifest
from opct_lab.report.study import write_study_report
from opct_lab.study.plan import StudyPlan, StudyRun, StudyStep


class ResolveModels:
    """Every chosen family's model must resolve now (a missing folder or alias checkpoint), not a family later."""

    name = "models"

    def describe(self, plan: StudyPlan) -> str | None:
        return None

    def run(self, state: StudyRun) -> None:
        # deferred: opct.models loads torch, which a dry run never needs
        from opct.models import resolve_model_path

        for model in state.chosen.values():
            resolve_model_path(model)


class StudyFiles:
    """``study.json`` (the families, their experiments and levels) and the study's manifest."""

    name = "study files"

    def describe(self, plan: StudyPlan) -> str | None:
        return None

    def run(self, state: StudyRun) -> None:
        study = state.study
        state.layout.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(state.layout.study, {
            "name": study.name, "families": dict(study.families), "seeds": study.seeds, "methods": study.methods,
            "axes": study.axes, "experiments": {family: family for family in study.families},
            **({"levels": {lv: list(names) for lv, names in study.levels.items()}} if study.levels else {}),
        })
        write_json_atomic(state.layout.manifest, build_manifest("study", study.model_dump(mode="json")))


class FamilyExperiments:
    """Each chosen family's experiment (resumable on its own); one whose evals are incomplete does not stop the
    others: it is named at the end."""

    name = "families"

    def describe(self, plan: StudyPlan) -> str | None:
        return plan.families_text()

    def run(self, state: StudyRun) -> None:
        for family, model in state.chosen.items():
            fplan = state.plan.families[family]
            state.log(f"family {family}: {model} -> {fplan.experiment.root}")
            try:
                run_experiment(fplan.experiment, show_progress=state.show_progress, log=state.log,
                               **({"jobs": state.jobs} if state.jobs > 1 else {}))  # --jobs 1: the call as it always was
            except IncompleteEvalError as err:
                state.unfinished.append(f"{family}: {err}")


class PooledReport:
    """The pooled report (OPCT − BCT over families and seeds), once every family has run."""

    name = "report"

    def describe(self, plan: StudyPlan) -> str | None:
        s = plan.study
        stages = sum(len(p.stages) for p in plan.families.values())
        return (f"then the pooled report (OPCT − BCT over families and seeds): {stages} stages in all, "
                f"report.md and report.json in {s.root}")

    def run(self, state: StudyRun) -> None:
        if len(state.chosen) < len(state.study.families):
            state.log(f"pooled report: not written, it waits for every family (this run: {', '.join(state.chosen)}); "
                      "run the study without --family to finish it, the finished families resume")
            return
        state.log("pooled report")
        write_study_report(state.study.root)


#: The generic study's steps, in order.
STUDY_STEPS: tuple[StudyStep, ...] = (ResolveModels(), StudyFiles(), FamilyExperiments(), PooledReport())

