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

Recipes per family: ``family_picks`` maps a family to its own recipe selection (``selection``: that
family's ``selection.json``, relative to the study file; ``rule``: whose picks train). Its experiment
then trains that file's picks (``method_settings[rule]``, method by method over the shared ones) and
keeps that file as its evidence (``<family>/selection.json``); a family not listed trains the shared
``method_settings``. ``pick_rule`` sets every listed family's rule at once (``opct demo --full --rule``).
:func:`select_per_family` runs a selection once per family (``opct demo --full --reselect``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from opct.config import ConfigError, FolderName, check_path_component, validate_config
from opct.experiments.files import read_extended, read_referenced
from opct.experiments.recipes import rule_variants, selection_rule
from opct.experiments.runner import (
    ExperimentConfig,
    IncompleteEvalError,
    Plan,
    resolve,
)
from opct.runs.atomic import write_json_atomic
from opct.runs.experiment_layout import ExperimentLayout
from opct.runs.manifest import build_manifest

#: The file that marks a directory as a study (``opct report`` reads it to tell a study from an experiment).



class FamilyPicks(BaseModel):
    """One family's recipes: the selection that chose them and the rule whose picks train."""

    model_config = ConfigDict(extra="forbid")

    selection: str = Field(description="that family's selection.json (relative to the study file)")
    rule: str = Field("teacher_kl", description="whose picks train: teacher_kl, good_behaviour or family_transfer")


class StudyConfig(ExperimentConfig):
    """An experiment run once per model family; ``model:``'s other settings are shared by every family."""

    name: FolderName = "study"
    families: dict[str, str] = Field(
        min_length=1, description="family name -> model (a registered alias, a hub id or a folder); one experiment each"
    )
    family_picks: dict[str, FamilyPicks] = Field(
        default_factory=dict, description="family -> its own selection.json and rule (else the shared method_settings)"
    )
    pick_rule: str | None = Field(None, description="when set, the rule of every family in family_picks")
    levels: dict[str, list[str]] = Field(
        default_factory=dict, description="level of the organism's knob -> its families, in the dose-response "
        "study's order (docs/mechanism.md): every family in exactly one level; the report adds OPCT − BCT per "
        "level against each level's measured dose")

    @field_validator("families")
    @classmethod
    def _family_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            check_path_component(name, "family name")
        return value

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: dict[str, list[str]], info: ValidationInfo) -> dict[str, list[str]]:
        """Each level a usable folder name, every family in exactly one level (checked here, on ``levels``
        alone, so that an error shows this field and not the whole configuration)."""
        for name in value:
            check_path_component(name, "level name")
        if not value:
            return value
        families = info.data.get("families") or {}
        listed = [f for names in value.values() for f in names]
        problems = [f"level {lv} has no family" for lv, names in value.items() if not names]
        problems += [f"{f} is not one of families" for f in dict.fromkeys(listed) if f not in families]
        problems += [f"{f} is in more than one level" for f in dict.fromkeys(listed) if listed.count(f) > 1]
        problems += [f"{f} is in no level" for f in families if f not in listed]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @model_validator(mode="after")
    def _one_run_per_method_and_seed(self) -> StudyConfig:
        if not self.mix_axes:
            raise ValueError("a study trains one run per method and seed on all axes mixed: set mix_axes: true")
        unknown = sorted(set(self.family_picks) - set(self.families))
        if unknown:
            raise ValueError(f"family_picks names {', '.join(unknown)}, which families does not")
        return self


def load_study(path: str | Path, overrides: list[str] | None = None) -> StudyConfig:
    """Read a study YAML (:func:`read_extended`); unknown keys are errors naming them; ``family_picks``
    selection paths are read relative to the study file."""
    tree, source = read_extended(path, "study", overrides)
    return validate_config(StudyConfig, tree, source)


def family_recipes(study: StudyConfig, family: str) -> tuple[str | None, dict[str, Any]]:
    """``(selection.json, method_settings)`` a family trains with: its own picks (``family_picks``), else
    the study's shared ones. A rule the selection file does not hold is an error naming the file."""
    picks = study.family_picks.get(family)
    if picks is None:
        return study.selection, study.method_settings
    rule = study.pick_rule or picks.rule
    evidence = read_referenced(picks.selection, f"study {study.name}", f"family_picks.{family}.selection")
    if rule not in evidence.get("method_settings", {}):
        raise ConfigError(f"family {family}: {picks.selection} holds no {rule!r} picks (it has "
                          f"{', '.join(evidence.get('method_settings', {})) or 'none'}); choose anew: opct demo --full --reselect")
    return picks.selection, {**study.method_settings, **evidence["method_settings"][rule]}


def select_per_family(study: StudyConfig, selection_file: str | Path, jobs: int = 1, log: Callable[[str], Any] = print,
                      overrides: list[str] | None = None) -> dict[str, Path]:
    """Run the selection of ``selection_file`` once per family of ``study`` (the family's model, its own
    folder ``<selection output_dir>/<family>/``; resumable); returns each family's ``selection.json``."""
    from opct.experiments.selection import load_selection, run_selection

    out = {}
    for family, model in study.families.items():
        base = load_selection(selection_file, overrides)
        cfg = load_selection(selection_file, [*(overrides or []), f"model.name_or_path={model}",
                                              f"output_dir={Path(base.output_dir) / family}"])
        log(f"[select] family {family}: {model} -> {cfg.root}")
        out[family] = run_selection(cfg, jobs=jobs, log=log)
    return out


def is_study_file(path: str | Path) -> bool:
    """Whether a YAML configuration is a study (it, or a file its ``extends:`` chain names, has ``families``)
    rather than one experiment."""
    tree, _ = read_extended(path, "experiment")
    return "families" in tree


def is_study_dir(path: str | Path) -> bool:
    """Whether a directory holds a study (its :data:`STUDY_FILE`)."""
    return ExperimentLayout(Path(path)).study.is_file()


def family_experiment(study: StudyConfig, family: str) -> ExperimentConfig:
    """The experiment of one family: the study's settings, its model, named after the family, in the study's folder."""
    tree = study.model_dump(mode="json", exclude={"families", "family_picks", "pick_rule", "levels"})
    if study.compare_rules and study.selection:  # the shared picks' rule variants give way to the family's own
        evidence = read_referenced(study.selection, f"study {study.name}", "selection")
        shared = rule_variants(evidence, selection_rule(evidence, study.method_settings) or "teacher_kl")
        tree["variants"] = {k: v for k, v in tree["variants"].items() if k not in shared}
        tree["methods"] = [m for m in tree["methods"] if m not in shared]
    tree["selection"], tree["method_settings"] = family_recipes(study, family)
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
                 f"seeds: {', '.join(map(str, s.seeds))}; methods: {', '.join(s.methods)}"]
        if s.levels:
            lines.append("levels (OPCT − BCT per level against its dose; first, each family's base organism where its "
                         f"folder is missing, then its profile where {s.root}/profiles/ lacks it): " + "; ".join(f"{lv}: {', '.join(names)}"
                                                                            for lv, names in s.levels.items()))
        lines.append("families (one experiment each, resumable on its own):")
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
        stages = sum(len(p.stages) for p in self.families.values())
        if s.levels:
            lines.append("then each finished run's KL(fine-tuned ‖ base) on its training prompts (train/<run>/kl_to_base.json)")
        lines.append(f"then the pooled report (OPCT − BCT over families and seeds): {stages} stages in all, "
                     f"report.md and report.json in {s.root}")
        return "\n".join(lines)


def _recipes_source(study: StudyConfig, family: str) -> str:
    """Where a family's recipes come from, in words."""
    picks = study.family_picks.get(family)
    if picks is None:
        return "the shared method_settings" + (f" ({Path(study.selection).name})" if study.selection else "")
    return f"its own selection {picks.selection} ({study.pick_rule or picks.rule} rule)"


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


def run_study(study: StudyConfig, show_progress: bool = True, log: Any = print, jobs: int = 1,
              only: list[str] | None = None) -> Path:
    """Run (or resume) every family's experiment, then write the pooled report; returns the study folder.

    A family whose evals are incomplete does not stop the others: the report is written with what
    there is, and :class:`IncompleteEvalError` is raised at the end naming every such family (unless
    ``eval.allow_unscored``, as in an experiment). ``jobs``: each family's stages at a time (``opct run --jobs``).
    ``only``: run these families alone (``opct run --family``; a long study a family at a time); each family's
    own report is written, the pooled report is not (it waits for a run of every family, which then resumes the
    finished ones)."""
    from opct.experiments.runner import run_experiment
    from opct.models import resolve_model_path
    from opct.report.study import write_study_report

    plan = resolve_study(study)
    chosen = chosen_families(study, only)
    if study.levels:  # first, each level's missing base organism (resumable: a finished build is kept)
        from opct.experiments.levels import ensure_level_builds

        ensure_level_builds(_levels_of(study.levels, chosen), chosen, log=log)
    for model in chosen.values():  # a missing folder or alias checkpoint fails now, not a family later
        resolve_model_path(model)
    root = study.root
    root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(ExperimentLayout(root).study, {
        "name": study.name, "families": dict(study.families), "seeds": study.seeds, "methods": study.methods,
        "axes": study.axes, "experiments": {family: family for family in study.families},
        **({"levels": {lv: list(names) for lv, names in study.levels.items()}} if study.levels else {}),
    })
    write_json_atomic(ExperimentLayout(root).manifest, build_manifest("study", study.model_dump(mode="json")))
    if study.levels:  # each level's dose first: its families' base-organism profiles (kept when already there)
        from opct.experiments.levels import ensure_level_profiles

        ensure_level_profiles(root, _levels_of(study.levels, chosen), chosen, log=log)
    unfinished = []
    for family, model in chosen.items():
        fplan = plan.families[family]
        log(f"family {family}: {model} -> {fplan.experiment.root}")
        try:
            run_experiment(fplan.experiment, show_progress=show_progress, log=log,
                           **({"jobs": jobs} if jobs > 1 else {}))  # --jobs 1: the call as it always was
        except IncompleteEvalError as err:
            unfinished.append(f"{family}: {err}")
    if study.levels:  # RL's Razor's measure on every finished run (kept on a rerun)
        from opct.experiments.run_kl import ensure_run_kls

        ensure_run_kls(root, chosen, log=log)
    if len(chosen) < len(study.families):
        log(f"pooled report: not written, it waits for every family (this run: {', '.join(chosen)}); "
            "run the study without --family to finish it, the finished families resume")
    else:
        log("pooled report")
        write_study_report(root)
    if unfinished:
        raise IncompleteEvalError("\n".join(unfinished))
    return root


def chosen_families(study: StudyConfig, only: list[str] | None) -> dict[str, str]:
    """The families a run covers (``only``'s, in the study's order; all when ``only`` is empty), each with its model."""
    unknown = [f for f in only or [] if f not in study.families]
    if unknown:
        raise ConfigError(f"--family {', '.join(unknown)}: not a family of study {study.name} "
                          f"(its families: {', '.join(study.families)})")
    return {f: m for f, m in study.families.items() if not only or f in only}


def _levels_of(levels: dict[str, list[str]], chosen: dict[str, str]) -> dict[str, list[str]]:
    """``levels`` cut to the chosen families (a level none of them is in is left out)."""
    cut = {level: [f for f in names if f in chosen] for level, names in levels.items()}
    return {level: names for level, names in cut.items() if names}
