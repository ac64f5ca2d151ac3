"""A study's settings: an experiment run once per model family, each family on its own recipes.

A study is an experiment configuration (:class:`opct.experiments.runner.ExperimentConfig`) plus
``families``, a mapping from a family name to the model it uses; ``extends: FILE`` (relative to the
study file) takes every other setting from an experiment file, which the study's own keys and
``--set`` then override. ``opct-lab demo-full`` runs ``opct_lab/studies/organism_demo_full.yaml``: the
library's demo experiment once per organism architecture, seeds 0, 1 and 2.

Recipes per family: ``family_picks`` maps a family to its own recipe selection (``selection``: that
family's ``selection.json``, relative to the study file; ``rule``: whose picks train). Its experiment
then trains that file's picks (``method_settings[rule]``, method by method over the shared ones) and
keeps that file as its evidence (``<family>/selection.json``); a family not listed trains the shared
``method_settings``. ``pick_rule`` sets every listed family's rule at once (``opct-lab demo-full --rule``).
``levels`` makes it the response-diversity study (docs/mechanism.md; its steps: :mod:`opct_lab.study.mechanism`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from opct.config import ConfigError, FolderName, check_path_component, validate_config
from opct.experiments.files import read_extended, read_referenced
from opct.experiments.recipes import rule_variants, selection_rule
from opct.experiments.runner import ExperimentConfig


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
                          f"{', '.join(evidence.get('method_settings', {})) or 'none'}); choose anew: opct-lab demo-full --reselect")
    return picks.selection, {**study.method_settings, **evidence["method_settings"][rule]}


def is_study_file(path: str | Path) -> bool:
    """Whether a YAML configuration is a study (it, or a file its ``extends:`` chain names, has ``families``)
    rather than one experiment."""
    tree, _ = read_extended(path, "experiment")
    return "families" in tree


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


def chosen_families(study: StudyConfig, only: list[str] | None) -> dict[str, str]:
    """The families a run covers (``only``'s, in the study's order; all when ``only`` is empty), each with its model."""
    unknown = [f for f in only or [] if f not in study.families]
    if unknown:
        raise ConfigError(f"--family {', '.join(unknown)}: not a family of study {study.name} "
                          f"(its families: {', '.join(study.families)})")
    return {f: m for f, m in study.families.items() if not only or f in only}


def levels_of(levels: dict[str, list[str]], chosen: dict[str, str]) -> dict[str, list[str]]:
    """``levels`` cut to the chosen families (a level none of them is in is left out)."""
    cut = {level: [f for f in names if f in chosen] for level, names in levels.items()}
    return {level: names for level, names in cut.items() if names}
