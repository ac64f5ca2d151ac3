"""Experiments: a model, axes, methods and seeds, run as resumable stages.

Stages: evaluate the base model; train each (method, seed[, axis]); evaluate every checkpoint on
the held-out and training perturbation splits and on capability; attack every model; report.
Every stage writes under ``<output_dir>/<name>/``; a rerun skips what is complete and verified and
continues what was interrupted (training resumes from its last checkpoint, evaluation from the
samples already written), and redoes the stages whose inputs changed or that ``--force`` names
(:mod:`opct.experiments.invalidation`).
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from opct.attack.experiment_stage import check_attack_settings
from opct.attack.grammar import behaviors_from_file
from opct.axes import AXES, organism_view
from opct.config import (
    ConfigError,
    RunConfig,
    _format_validation_error,
    set_dotted,
)
from opct.errors import FAULT, OpctError, OpctWarning
from opct.experiments.experiment_config import ExperimentConfig, load_experiment
from opct.experiments.files import deep_merge, read_referenced
from opct.experiments.invalidation import parse_force
from opct.experiments.parallel import run_in_workers
from opct.experiments.recipes import recipe_summary, selection_rule
from opct.experiments.stages import ExperimentStages, stage_graph, track_results
from opct.methods import METHODS
from opct.organism.pairs import held_back_families
from opct.report import write_report
from opct.runs.atomic import write_json_atomic
from opct.runs.experiment_layout import ExperimentLayout
from opct.runs.manifest import build_manifest, keep_history


@dataclass
class TrainStage:
    """One training run of the plan."""

    key: str
    config: RunConfig
    variant: str | None = None  # the variant of the experiment this run trains, if any


@dataclass
class Plan:
    """Everything an experiment will do, resolved."""

    experiment: ExperimentConfig
    runs: list[TrainStage]
    models: dict[str, str]  # row key -> model spec to evaluate
    evals: list[str]
    stages: list[str] = field(default_factory=list)

    def describe(self) -> str:
        cfg = self.experiment
        lines = [f"experiment {cfg.name} -> {cfg.root}", f"model: {cfg.model.name_or_path}", "stages:"]
        lines += ["  " + line for line in self.stage_lines()]
        lines.append("training runs:")
        lines += ["  " + line for line in self.run_lines()]
        lines.append(self.evals_line())
        return "\n".join(lines)

    def stage_lines(self) -> list[str]:
        """The stages in the order they run, numbered from 1."""
        return [f"{i + 1}. {stage}" for i, stage in enumerate(self.stages)]

    def evals_line(self) -> str:
        """The evaluations every model of the plan gets, in one line."""
        return f"evaluations per model: {', '.join(self.evals)}"

    def run_lines(self) -> list[str]:
        """One line per training run: its method, changed settings, steps, batch, learning rate and data."""
        lines = []
        for r in self.runs:
            c = r.config
            what = f"{c.train.max_steps} steps" if c.train.max_steps else f"{c.train.epochs} epoch(s)"
            changed = self.experiment.variants[r.variant].settings if r.variant else {}
            shown = c.method == "opct" and not any(k.startswith("opct.loss") for k in changed)  # else the variant says it
            loss = f", {c.method_config.loss.kind} loss" if shown else ""
            lines.append(f"{r.key}: {c.method}{loss}{''.join(f', {k}={v}' for k, v in changed.items())}, {what}, "
                         f"{c.train.pairs_per_step} pairs/step, lr {c.optim.lr:g}, data {', '.join(c.data.train)}")
        return lines


def _sources(cfg: ExperimentConfig, axis: str) -> list[str]:
    return cfg.train_data.get(axis, [f"organism:{axis}:train"])


def default_validation_sources(axis: str) -> list[str]:
    """An axis's validation pair sources: ``organism:<axis>:val`` when its organism view names a cluster key,
    and ``organism:<axis>:famval`` when it holds back whole families from training (:mod:`opct.organism.pairs`);
    none for an axis without an organism view."""
    organism = organism_view(AXES.get(axis))
    val = [f"organism:{axis}:val"] if organism.cluster_key else []
    famval = [f"organism:{axis}:famval"] if organism.validation_families else []
    return [*val, *famval]


def held_back_by_axis(cfg: ExperimentConfig) -> dict[str, list[str]]:
    """The families each axis holds back from training (its ``famval`` split), for the axes ``cfg`` trains on
    ``organism:<axis>:train``; an axis trained on other data, or holding back nothing, is left out. An
    experiment's manifest records it as ``held_back_families``."""
    return {a: list(fams) for a in cfg.axes if f"organism:{a}:train" in _sources(cfg, a) and (fams := held_back_families(a))}


def _validation_sources(cfg: ExperimentConfig, axis: str) -> list[str]:
    return cfg.validation_data.get(axis, default_validation_sources(axis))


def method_recipe(cfg: ExperimentConfig, name: str) -> dict[str, Any]:
    """The run settings of a method or variant: the shared ``train`` settings (a method's own section
    reaching only that method), then the method's ``method_settings``, then a variant's dotted settings."""
    variant = cfg.variants.get(name)
    method = variant.method if variant else name
    shared = {k: v for k, v in cfg.train.items() if k == method or k not in METHODS}
    tree = deep_merge(shared, cfg.method_settings.get(method, {}))
    for key, value in (variant.settings if variant else {}).items():
        set_dotted(tree, key, copy.deepcopy(value))
    return tree


def _unperturbed_axes() -> list[str]:
    """Registered axes without pairs (capability): evaluated once per model when ``eval.capability``."""
    return [name for name, axis in AXES.items() if not axis.has_pairs]


def eval_names(cfg: ExperimentConfig) -> list[str]:
    """The evaluation names every model gets (held-out first, ``_train`` for training families)."""
    names = []
    for axis in cfg.axes:
        for split in cfg.eval.splits:
            names.append(axis if split == "heldout" else f"{axis}_train")
    if cfg.eval.capability:
        names.extend(_unperturbed_axes())
    return names


def resolve(cfg: ExperimentConfig) -> Plan:
    """Resolve the experiment into training runs (validated run configs) and models to evaluate; its
    ``selection`` file is read and checked here too (a ``--set selection=`` path is not read with the file)."""
    if cfg.selection:
        read_referenced(cfg.selection, f"experiment {cfg.name}", "selection")
    runs: list[TrainStage] = []
    models: dict[str, str] = {}
    if "base" in cfg.methods:
        models["base"] = cfg.model.name_or_path
    groups = [("all", list(cfg.axes))] if cfg.mix_axes else [(a, [a]) for a in cfg.axes]
    for method in [m for m in cfg.methods if m != "base"]:
        for seed in cfg.seeds:
            for group, axes in groups:
                key = method
                if not cfg.mix_axes:
                    key += f"-{group}"
                if len(cfg.seeds) > 1:
                    key += f"-s{seed}"
                tree = method_recipe(cfg, method)
                tree = deep_merge(
                    tree,
                    {
                        "name": key,
                        "output_dir": str(ExperimentLayout(cfg.root).train),
                        "method": cfg.variants[method].method if method in cfg.variants else method,
                        "seed": seed,
                        "model": cfg.model.model_dump(),
                        "data": {"train": [s for a in axes for s in _sources(cfg, a)]},
                    },
                )
                if (tree.get("validation") or {}).get("every"):  # measured on the axes' validation splits
                    tree["data"]["validation"] = [s for a in axes for s in _validation_sources(cfg, a)]
                try:
                    run = RunConfig.model_validate(tree)
                except ValidationError as err:
                    raise ConfigError(_format_validation_error(err, f"experiment {cfg.name}, run {key}", RunConfig)) from None
                runs.append(TrainStage(key, run, method if method in cfg.variants else None))
                models[key] = str(ExperimentLayout(cfg.root).run(key))
    stages = ["evaluate the base model"] if "base" in cfg.methods else []
    stages += [f"train {r.key}" for r in runs]
    stages += [f"evaluate {k}" for k in models if k != "base"]
    if cfg.attack.enabled:
        stages += [f"attack {k}" for k in models]
    stages.append("report")
    return Plan(cfg, runs, models, eval_names(cfg), stages)


def experiment_eval_tasks(cfg: ExperimentConfig) -> list[Any]:
    """The eval tasks an experiment runs on every model, for each of ``eval.splits``: its axes, and the
    unperturbed axes (capability) once when ``eval.capability``; a task on the training split is named
    ``<name>_train``."""
    # deferred: loads torch and transformers only when called
    from opct.evals.suite import eval_tasks

    evals = [*cfg.axes, *(_unperturbed_axes() if cfg.eval.capability else [])]
    return eval_tasks(evals, cfg.eval, suffix_train=True)


def write_experiment_manifest(root: Path, cfg: ExperimentConfig) -> None:
    """Write the experiment's ``manifest.json``, keeping an earlier start's ``created`` (and listing this
    one under ``resumed``); an earlier manifest that cannot be read (cut by a kill, edited) is replaced
    with a warning naming it, never silently."""
    path = ExperimentLayout(root).manifest
    manifest = build_manifest("experiment", cfg.model_dump(mode="json"))
    if path.exists():
        try:
            readable = isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
        except (OSError, ValueError):
            readable = False
        if not readable:
            warnings.warn(f"{path} could not be read (cut or edited): it is written anew, and the experiment's "
                          "earlier history in it (when it was first started) is lost", OpctWarning, stacklevel=2)
        manifest = keep_history(path, manifest)
    write_json_atomic(path, manifest)


def run_experiment(cfg: ExperimentConfig, show_progress: bool = True, log: Any = print,
                   force: Sequence[str] = (), jobs: int = 1) -> Path:
    """Run (or resume) every stage of the experiment; returns the experiment directory. A stage whose
    inputs changed is redone, and so is each one ``force`` names (``train:opct``, ``eval``, ``attack:bct``;
    the rules are in :mod:`opct.experiments.invalidation`). ``jobs > 1``: the stages run ``jobs`` at a
    time, each in its own process with one CPU thread (:mod:`opct.experiments.parallel`), with the same results."""
    plan = resolve(cfg)
    forces = plan_forces(cfg, plan, force)
    root = cfg.root
    layout = ExperimentLayout(root)
    root.mkdir(parents=True, exist_ok=True)
    evidence = read_referenced(cfg.selection, f"experiment {cfg.name}", "selection") if cfg.selection else {}
    if evidence:  # the evidence the recipes were chosen by, beside the results it led to
        write_json_atomic(layout.selection, evidence)
    write_json_atomic(layout.plan, {
        "name": cfg.name, "model": cfg.model.name_or_path, "methods": list(plan.models), "axes": list(cfg.axes),
        "seeds": cfg.seeds, "evals": plan.evals, "stages": plan.stages,
        "recipes": {r.key: recipe_summary(r.config) for r in plan.runs}, "selection": cfg.selection,
        "selection_rule": selection_rule(evidence, cfg.method_settings), "held_back_families": held_back_by_axis(cfg),
        "variants": {name: v.model_dump(mode="json") for name, v in cfg.variants.items()}, "reference": cfg.reference,
    })
    write_experiment_manifest(root, cfg)
    tasks = experiment_eval_tasks(cfg)
    check_plan(cfg, plan)
    stages = ExperimentStages(cfg, plan.models, {r.key: r.config for r in plan.runs}, tasks, forces, show_progress, log)
    if jobs > 1:  # each stage in its own worker process, as its dependencies finish

        unfinished = run_in_workers(cfg, stage_graph(list(plan.models), [r.key for r in plan.runs], cfg.attack.enabled),
                                    jobs, force, log, finished=stages.finished)
        stages.track(list(plan.models))
    else:
        unfinished = stages.run_in_order()

    write_report(root)
    if unfinished and not cfg.eval.allow_unscored:
        raise IncompleteEvalError(
            "some evals are incomplete (their numbers are not a measurement of the model; the report marks them):\n  "
            + "\n  ".join(unfinished) + "\nSet eval.allow_unscored: true to accept them."
        )
    return root


def plan_forces(cfg: ExperimentConfig, plan: Plan, force: Sequence[str]) -> list[Any]:
    """``--force`` arguments checked against the plan's stages (:func:`~opct.experiments.invalidation.parse_force`)."""
    return parse_force(force, {"train": [r.key for r in plan.runs], "eval": list(plan.models),
                               "attack": list(plan.models) if cfg.attack.enabled else []})


def run_stage(cfg: ExperimentConfig, stage: str, force: Sequence[str] = (), log: Any = print) -> list[str]:
    """Run one stage of the experiment (``train:KEY``, ``eval:KEY``, ``attack:KEY``), as a worker of
    ``opct run --jobs N`` does, and write its incomplete evals' lines where the experiment reads them;
    returns them. The experiment's own process wrote the plan and checked its inputs."""
    plan = resolve(cfg)
    forces = plan_forces(cfg, plan, force)
    graph = {s.name: s for s in stage_graph(list(plan.models), [r.key for r in plan.runs], cfg.attack.enabled)}
    if stage not in graph:
        raise ConfigError(f"--stage {stage!r}: experiment {cfg.name} has no such stage; its stages: {', '.join(graph)}")
    stages = ExperimentStages(cfg, plan.models, {r.key: r.config for r in plan.runs}, experiment_eval_tasks(cfg), forces, False, log)
    unfinished = stages.run(graph[stage])
    write_json_atomic(ExperimentLayout(cfg.root).stage_outcome(stage), {"stage": stage, "unfinished": unfinished})
    return unfinished


class IncompleteEvalError(OpctError, ValueError):
    """An experiment finished with evals whose unscored share exceeds ``eval.max_unscored``."""

    exit_code = FAULT


def check_plan(cfg: ExperimentConfig, plan: Plan) -> None:
    """Read every input the plan needs (training pairs, the attack's behaviours) and let the attacker
    (``attack.strategy``) check its settings before any stage runs, so a bad path or setting fails in seconds
    rather than after the base evaluation or the training."""
    # deferred: loads accelerate, torch and transformers only when called
    from opct.training.loop import load_training_pairs

    if cfg.attack.enabled:
        check_attack_settings(cfg)
    for stage in plan.runs:
        load_training_pairs(stage.config)
    if cfg.attack.enabled and cfg.eval.data == "real":
        behaviors_from_file(cfg.eval.real_paths()["behaviors"])


__all__ = ["ExperimentConfig", "IncompleteEvalError", "Plan", "TrainStage", "check_plan", "load_experiment", "resolve",
           "run_experiment", "run_stage", "track_results", "write_experiment_manifest"]
