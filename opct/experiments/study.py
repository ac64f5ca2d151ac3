"""Studies: one experiment per model family, the same methods and seeds in each, then a pooled report.

A study is an experiment configuration (:class:`opct.experiments.runner.ExperimentConfig`) plus
``families``, a mapping from a family name to the model it uses; ``extends: FILE`` (relative to the
study file) takes every other setting from an experiment file, which the study's own keys and
``--set`` then override. ``opct demo --full`` runs ``opct/experiments/organism_demo_full.yaml``: the
demo experiment once per organism architecture, seeds 0, 1 and 2.

Layout::

    <output_dir>/<name>/study.json  manifest.json  report.md  report.json
    <output_dir>/<name>/<family>/   one experiment directory per family (opct.experiments.runner's layout)

Each family is an ordinary experiment, run by :func:`opct.experiments.runner.run_experiment` and resumable
as it is: a rerun skips finished training runs (their manifest must match), continues evaluations
and attacks from the records already written, and rewrites the family's report. The base model is
evaluated and attacked once per family (greedy decoding and a fixed eval/attack seed: nothing in it
depends on the training seed). After the families, :func:`opct.report.study.write_study_report`
writes the pooled report (per-family tables, OPCT − BCT pooled over families and seeds with a
verdict per metric); ``opct report <study dir>`` rewrites it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from opct.config import ConfigError, FolderName, validate_config
from opct.experiments.files import read_extended
from opct.experiments.runner import (
    ExperimentConfig,
    IncompleteEvalError,
    Plan,
    resolve,
)
from opct.report.study import STUDY_FILE
from opct.runs.manifest import build_manifest, write_json_atomic

#: The file that marks a directory as a study (``opct report`` reads it to tell a study from an experiment).

_FAMILY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class StudyConfig(ExperimentConfig):
    """An experiment run once per model family; ``model:``'s other settings are shared by every family."""

    name: FolderName = "study"
    families: dict[str, str] = Field(
        min_length=1, description="family name -> model (a registered alias, a hub id or a folder); one experiment each"
    )

    @field_validator("families")
    @classmethod
    def _family_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [name for name in value if not _FAMILY_NAME.match(name)]
        if bad:
            raise ValueError(f"family names become folder names: use letters, digits, '.', '_' and '-' ({', '.join(bad)})")
        return value

    @model_validator(mode="after")
    def _one_run_per_method_and_seed(self) -> StudyConfig:
        if not self.mix_axes:
            raise ValueError("a study trains one run per method and seed on all axes mixed: set mix_axes: true")
        return self


def load_study(path: str | Path, overrides: list[str] | None = None) -> StudyConfig:
    """Read a study YAML (:func:`read_extended`); unknown keys are errors naming them."""
    return validate_config(StudyConfig, *read_extended(path, "study", overrides))


def is_study_file(path: str | Path) -> bool:
    """Whether a YAML configuration is a study (it, or a file its ``extends:`` chain names, has ``families``)
    rather than one experiment."""
    tree, _ = read_extended(path, "experiment")
    return "families" in tree


def is_study_dir(path: str | Path) -> bool:
    """Whether a directory holds a study (its :data:`STUDY_FILE`)."""
    return (Path(path) / STUDY_FILE).is_file()


def family_experiment(study: StudyConfig, family: str) -> ExperimentConfig:
    """The experiment of one family: the study's settings, its model, named after the family, in the study's folder."""
    tree = study.model_dump(mode="json", exclude={"families"})
    tree["name"] = family
    tree["output_dir"] = str(study.root)
    tree["model"]["name_or_path"] = study.families[family]
    return ExperimentConfig.model_validate(tree)


@dataclass
class StudyPlan:
    """Everything a study will do: one experiment plan per family, then the pooled report."""

    study: StudyConfig
    families: dict[str, Plan]

    def describe(self) -> str:
        s = self.study
        lines = [f"study {s.name} -> {s.root}",
                 f"seeds: {', '.join(map(str, s.seeds))}; methods: {', '.join(s.methods)}",
                 "families (one experiment each, resumable on its own):"]
        lines += [f"  {family}: model {s.families[family]} ({_model_kind(s.families[family])}) -> {plan.experiment.root}"
                  for family, plan in self.families.items()]
        first = next(iter(self.families.values()))
        lines.append("each family's experiment (shown for the first; the same for every family):")
        lines += ["  " + line for line in first.describe().splitlines()[2:]]
        stages = sum(len(p.stages) for p in self.families.values())
        lines.append(f"then the pooled report (OPCT − BCT over families and seeds): {stages} stages in all, "
                     f"report.md and report.json in {s.root}")
        return "\n".join(lines)


def _model_kind(name: str) -> str:
    """How a family's model name will be read: a registered alias, a local folder, else a hub id."""
    from opct.config import MODEL_ALIASES

    if name in MODEL_ALIASES:
        return "alias"
    return "folder" if Path(name).expanduser().exists() else "no such alias or folder: a hub id"


def resolve_study(study: StudyConfig) -> StudyPlan:
    """Resolve every family's experiment (validated run configs, models to evaluate)."""
    plans = {}
    for family in study.families:
        try:
            plans[family] = resolve(family_experiment(study, family))
        except ConfigError as err:
            raise ConfigError(f"study {study.name}, family {family}: {err}") from None
    return StudyPlan(study, plans)


def run_study(study: StudyConfig, show_progress: bool = True, log: Any = print) -> Path:
    """Run (or resume) every family's experiment, then write the pooled report; returns the study folder.

    A family whose evals are incomplete does not stop the others: the report is written with what
    there is, and :class:`IncompleteEvalError` is raised at the end naming every such family (unless
    ``eval.allow_unscored``, as in an experiment)."""
    from opct.experiments.runner import run_experiment
    from opct.models import resolve_model_path
    from opct.report.study import write_study_report

    plan = resolve_study(study)
    for model in study.families.values():  # a missing folder or alias checkpoint fails now, not a family later
        resolve_model_path(model)
    root = study.root
    root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(root / STUDY_FILE, {
        "name": study.name, "families": dict(study.families), "seeds": study.seeds, "methods": study.methods,
        "axes": study.axes, "experiments": {family: family for family in study.families},
    })
    write_json_atomic(root / "manifest.json", build_manifest("study", study.model_dump(mode="json")))
    unfinished = []
    for family, fplan in plan.families.items():
        log(f"family {family}: {study.families[family]} -> {fplan.experiment.root}")
        try:
            run_experiment(fplan.experiment, show_progress=show_progress, log=log)
        except IncompleteEvalError as err:
            unfinished.append(f"{family}: {err}")
    log("pooled report")
    write_study_report(root)
    if unfinished:
        raise IncompleteEvalError("\n".join(unfinished))
    return root
