"""The response-diversity study's own steps (a study with ``levels``, docs/mechanism.md), added to the generic
study's (:data:`opct_lab.study.steps.STUDY_STEPS`): first each level's base organism where its folder is missing,
after ``study.json`` each level family's profile (the level's dose), after the families each finished run's
KL(fine-tuned ‖ base). The pooled report reads what they leave (:mod:`opct_lab.report.levels`,
:mod:`opct_lab.report.razor`)."""

from __future__ import annotations

from collections.abc import Sequence

from opct_lab.study.config import levels_of
from opct_lab.study.levels import ensure_level_builds, ensure_level_profiles
from opct_lab.study.plan import StudyPlan, StudyRun, StudyStep
from opct_lab.study.run_kl import ensure_run_kls
from opct_lab.study.steps import FamilyExperiments, ResolveModels, StudyFiles


class LevelBuilds:
    """Each chosen level family's base organism, built where its folder is missing (a finished build is kept)."""

    name = "level builds"

    def describe(self, plan: StudyPlan) -> str | None:
        s = plan.study
        return ("levels (OPCT − BCT per level against its dose; first, each family's base organism where its "
                f"folder is missing, then its profile where {s.root}/profiles/ lacks it): "
                + "; ".join(f"{lv}: {', '.join(names)}" for lv, names in s.levels.items()))

    def run(self, state: StudyRun) -> None:
        ensure_level_builds(levels_of(state.study.levels, state.chosen), state.chosen, log=state.log)


class LevelProfiles:
    """Each level's dose: its chosen families' base-organism profiles (kept when already there)."""

    name = "level profiles"

    def describe(self, plan: StudyPlan) -> str | None:
        return None  # LevelBuilds' line names them

    def run(self, state: StudyRun) -> None:
        ensure_level_profiles(state.study.root, levels_of(state.study.levels, state.chosen), state.chosen, log=state.log)


class RunKLs:
    """RL's Razor's measure on every finished run (kept on a rerun)."""

    name = "kl to base"

    def describe(self, plan: StudyPlan) -> str | None:
        return "then each finished run's KL(fine-tuned ‖ base) on its training prompts (train/<run>/kl_to_base.json)"

    def run(self, state: StudyRun) -> None:
        ensure_run_kls(state.study.root, state.chosen, log=state.log)


def mechanism_steps(steps: Sequence[StudyStep]) -> tuple[StudyStep, ...]:
    """``steps`` with the mechanism study's own: the level builds before the models are checked, the profiles
    after the study's files, the runs' KL after the families' experiments."""
    after = {ResolveModels: None, StudyFiles: LevelProfiles(), FamilyExperiments: RunKLs()}
    out: list[StudyStep] = []
    for step in steps:
        if isinstance(step, ResolveModels):
            out.append(LevelBuilds())
        out.append(step)
        extra = after.get(type(step))
        if extra is not None:
            out.append(extra)
    return tuple(out)
