"""A study's plan: every family's experiment plan and the study's steps (:class:`StudyStep`), the dry run's text of
it, and what the steps share while they run (:class:`StudyRun`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from opct.config import MODEL_ALIASES, ConfigError
from opct.experiments.runner import Plan, resolve
from opct_lab.layout import StudyLayout
from opct_lab.study.config import StudyConfig, family_experiment


class StudyStep(Protocol):
    """One step of a study (:mod:`opct_lab.study.steps` holds the generic ones)."""

    name: str

    def describe(self, plan: StudyPlan) -> str | None:
        """The step's line in the dry run's plan (``None``: the step says nothing there)."""

    def run(self, state: StudyRun) -> None:
        """Do the step (resumable: a rerun keeps what a finished step left)."""


@dataclass
class StudyPlan:
    """Everything a study will do: one experiment plan per family, and its steps in order (the families'
    experiments and the pooled report among them)."""

    study: StudyConfig
    families: dict[str, Plan]
    steps: Sequence[StudyStep] = ()

    def describe(self) -> str:
        """The plan as ``--dry-run`` prints it: the study, then each step's line in order."""
        s = self.study
        lines = [f"study {s.name} -> {s.root}",
                 f"seeds: {', '.join(map(str, s.seeds))}; methods: {', '.join(s.methods)}"]
        lines += [text for step in self.steps if (text := step.describe(self)) is not None]
        return "\n".join(lines)

    def families_text(self) -> str:
        """The families, their shared stages and each family's training runs."""
        s = self.study
        lines = ["families (one experiment each, resumable on its own):"]
        lines += [f"  {family}: model {s.families[family]} ({_model_kind(s.families[family])}) -> {plan.experiment.root}; "
                  f"recipes: {_recipes_source(s, family)}" for family, plan in self.families.items()]
        first = next(iter(self.families.values()))
        lines.append("each family's stages (the same for every family):")
        lines += ["  " + line for line in first.stage_lines()]
        lines.append(first.evals_line())
        lines.append("training runs, by family (each on its own recipes):")
        for family, plan in self.families.items():
            lines.append(f"  {family}:")
            lines += ["    " + line for line in plan.run_lines()]
        return "\n".join(lines)


def _recipes_source(study: StudyConfig, family: str) -> str:
    """Where a family's recipes come from, in words."""
    picks = study.family_picks.get(family)
    if picks is None:
        return "the shared method_settings" + (f" ({Path(study.selection).name})" if study.selection else "")
    return f"its own selection {picks.selection} ({study.pick_rule or picks.rule} rule)"


def _model_kind(name: str) -> str:
    """How a family's model name will be read: a registered alias, a local folder, else a hub id."""
    if name in MODEL_ALIASES:
        return "alias"
    return "folder" if Path(name).expanduser().exists() else "no such alias or folder: a hub id"


def resolve_families(study: StudyConfig) -> dict[str, Plan]:
    """Resolve every family's experiment (validated run configs, models to evaluate)."""
    plans = {}
    for family in study.families:
        try:
            plans[family] = resolve(family_experiment(study, family))
        except ConfigError as err:
            raise ConfigError(f"study {study.name}, family {family}: {err}") from None
    return plans


@dataclass
class StudyRun:
    """What the steps of one run of a study share: the study, its plan, the families this run covers, how to
    log and run them, and the families whose evals were left incomplete."""

    study: StudyConfig
    plan: StudyPlan
    chosen: dict[str, str]
    log: Callable[[str], Any] = print
    show_progress: bool = True
    jobs: int = 1
    unfinished: list[str] = field(default_factory=list)

    @property
    def layout(self) -> StudyLayout:
        return StudyLayout(self.study.root)
