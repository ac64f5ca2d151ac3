"""Recipe selection (``opct select``): each method's own recipe, chosen by one rule on validation data.

A selection file is an experiment file (``extends:`` one, usually) plus a ``selection:`` block:
for every trained method, a grid of settings (dotted keys, a list of values each, expanded as a
product), the steps to train each candidate, how often to measure it, and the training seeds. Every
method gets the same number of candidates and every candidate sees the same training pairs per step.
Each candidate is trained once per seed with validation on (:mod:`opct.training.validation`: the
validation pairs held back from the *training* families, ``organism:<axis>:val``), measured before
its first step and every ``every`` steps. Checkpoint steps are part of the recipe: with a constant
learning rate, a run of ``k`` steps is the first ``k`` steps of the longer run (resume is exact).

The rules are fixed here, before any held-out number exists, and written into ``selection.json``:

* **eligible**: on every seed, no capability task's validation accuracy is more than
  ``capability_drop`` below the base model's (the run-start measurement);
* **teacher_kl**: the eligible (candidate, step) with the lowest validation teacher-KL (mean over seeds);
* **good_behaviour**: the eligible (candidate, step) with the highest validation good-behaviour rate
  (mean over axes, then over seeds); ties go to the lower teacher-KL, then to fewer steps.
* **family_transfer**: the eligible (candidate, step) with the highest score on the *family validation*
  split (whole training-side families held back from training, ``organism:<axis>:famval``), with a small
  adaptive attack on the validation behaviours for jailbreaks (:mod:`opct_lab.selection.family_rule`).

OPCT minimises the teacher-KL directly, so the first rule may favour it; the other two are
method-neutral, and only the third measures transfer to perturbations training never saw. Every pick is
reported; where picks differ, the comparison can train each
(``compare_rules: true`` in an experiment file, :func:`opct.experiments.recipes.rule_variants`).
Held-out data never enters: the validation split is refused if it contains held-out pairs.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from opct.axes import AXES
from opct.config import RunConfig, _set_path, dump_config, validate_config
from opct.evals.axis_views import organism_view
from opct.experiments.files import deep_merge, read_extended
from opct.experiments.invalidation import already_trained
from opct.experiments.parallel import run_stages, worker_environment
from opct.experiments.recipes import PICK_RULES
from opct.experiments.runner import ExperimentConfig, default_validation_sources, resolve
from opct.experiments.stages import Stage
from opct.methods import declared_compute
from opct.report.rollout_health import rollout_collapse
from opct.runs.atomic import finite_or_null, write_json_atomic
from opct.runs.compute import run_compute
from opct.runs.layout import RunLayout
from opct.runs.manifest import build_manifest
from opct_lab.layout import SelectionLayout
from opct_lab.selection.candidates import candidate_records
from opct_lab.selection.family_rule import RULE as FAMILY_RULE
from opct_lab.selection.family_rule import FamilyAttackSettings, attack_candidates, famval_rates, score_steps

RULES = {
    "eligible": "on every seed, every capability task's validation accuracy >= the base model's - capability_drop",
    "teacher_kl": "lowest validation teacher-KL (mean over seeds) among eligible (candidate, step)",
    "good_behaviour": "highest validation good-behaviour rate (mean over axes, then seeds) among eligible "
                      "(candidate, step); ties: lower teacher-KL, then fewer steps",
    "family_transfer": FAMILY_RULE,
}

#: Keys a grid may not vary: every candidate sees the same pairs per step and is measured alike.
FIXED_KEYS = ("train.pairs_per_step", "train.max_steps", "train.epochs", "validation", "data", "seed", "method")


class SelectionSettings(BaseModel):
    """The ``selection:`` block of a selection file."""
    model_config = ConfigDict(extra="forbid")

    grid: dict[str, dict[str, list[Any]]] = Field(description="method -> {dotted setting: [values]}")
    steps: int = Field(180, gt=0, description="steps each candidate trains")
    every: int = Field(20, gt=0, description="steps between validation measurements (and checkpoints)")
    seeds: list[int] = Field(default_factory=lambda: [0, 1], min_length=1, description="seeds each candidate trains with; the rules read the mean over seeds")
    validation: dict[str, Any] = Field(default_factory=dict, description="validation settings (ValidationConfig keys)")
    validation_data: dict[str, list[str]] = Field(default_factory=dict, description="axis -> validation pair sources")
    capability_drop: float = Field(0.03, ge=0.0, le=1.0, description="eligible only if, on every seed, each capability accuracy is at least the base model's minus this")
    family_attack: FamilyAttackSettings = Field(default_factory=FamilyAttackSettings,
                                                description="the family_transfer rule's attack on the validation behaviours")

    @model_validator(mode="after")
    def _equal_budget(self) -> SelectionSettings:
        sizes = {m: len(expand(g)) for m, g in self.grid.items()}
        if not sizes or not all(sizes.values()):
            empty = [f"selection.grid.{m}.{k}" for m, g in self.grid.items() for k, v in g.items() if not v]
            raise ValueError(f"the grid gives no candidate runs ({', '.join(empty) or 'selection.grid'} is empty): name "
                             "at least one method, and at least one value for every setting it varies")
        if len(set(sizes.values())) > 1:
            raise ValueError(f"every method gets the same number of candidates; the grid gives {sizes}")
        for method, grid in self.grid.items():
            fixed = [k for k in grid if any(k == f or k.startswith(f + ".") for f in FIXED_KEYS)]
            if fixed:
                raise ValueError(f"selection.grid.{method} varies {', '.join(fixed)}, which every candidate must share")
        if self.steps % self.every:
            raise ValueError("selection.steps must be a multiple of selection.every (the last step is measured)")
        return self


class SelectionConfig(ExperimentConfig):
    """An experiment's settings (model, axes, training) and the selection to run on them."""
    name: str = "selection"
    output_dir: str = "runs/selection"
    selection: SelectionSettings


def load_selection(path: str | Path, overrides: list[str] | None = None) -> SelectionConfig:
    """Read a selection file (:func:`~opct.experiments.files.read_extended`). A selection starts from the
    extended experiment's shared settings, never from an earlier pick (its ``method_settings``)."""
    tree, source = read_extended(path, "selection", overrides, drop=("method_settings", "selection"))
    return validate_config(SelectionConfig, tree, source)


def expand(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The product of a grid: one ``{dotted key: value}`` per candidate, in the order written."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]


def candidate_name(cid: str, seed: int) -> str:
    """A candidate's training run on one seed: ``bct-03-s1``."""
    return f"{cid}-s{seed}"


def candidate_dir(cfg: SelectionConfig, cid: str, seed: int) -> Path:
    """Where a candidate's run on one seed trains (its ``run_dir``)."""
    return SelectionLayout(cfg.root).candidate_runs / candidate_name(cid, seed)


def candidate_configs(cfg: SelectionConfig) -> list[tuple[str, str, dict[str, Any], RunConfig]]:
    """``(candidate id, method, recipe, run config)`` for every candidate and seed."""
    s = cfg.selection
    experiment = ExperimentConfig.model_validate(
        cfg.model_dump(mode="json", exclude={"selection", "method_settings"}) | {"seeds": [0]})
    stages = {stage.config.method: stage.config for stage in resolve(experiment).runs}
    missing = sorted(set(s.grid) - set(stages))
    if missing:
        raise ValueError(f"selection.grid names {', '.join(missing)}, which this experiment does not train")
    out = []
    for seed in s.seeds:  # every candidate's first seed before any second one
        for method in sorted(s.grid):
            for i, recipe in enumerate(expand(s.grid[method])):
                cid = f"{method}-{i:02d}"
                tree = dump_config(stages[method])
                for key, value in recipe.items():
                    _set_path(tree, key, value)
                sources = [src for a in cfg.axes for src in s.validation_data.get(a, default_validation_sources(a))]
                tree = deep_merge(tree, {
                    "name": candidate_name(cid, seed), "output_dir": str(SelectionLayout(cfg.root).candidate_runs), "seed": seed,
                    "train": {"max_steps": s.steps, "checkpoint_every": s.every,
                              **({"keep_checkpoints": s.steps // s.every} if s.family_attack.enabled else {})},
                    "data": {"validation": sources},
                    "validation": {**s.validation, "every": s.every},
                })
                out.append((cid, method, recipe, RunConfig.model_validate(tree)))
    return out


def run_candidates(cfg: SelectionConfig, jobs: int = 1, log: Callable[[str], Any] = print) -> None:
    """Train every candidate on every seed (each resumable; a finished run is left as it is), ``jobs`` at a
    time, each in its own ``opct train`` process (:func:`~opct.experiments.parallel.run_stages`, as ``opct
    run --jobs`` does: one log per candidate in ``stages/``, one CPU thread each when ``jobs > 1``; a failed
    candidate stops the others and names its log; a rerun continues)."""
    layout = SelectionLayout(cfg.root)
    layout.candidate_configs.mkdir(parents=True, exist_ok=True)
    runs = {}
    for *_, run in candidate_configs(cfg):
        path = layout.candidate_configs / f"{run.name}.yaml"
        path.write_text(yaml.safe_dump(dump_config(run), sort_keys=False), encoding="utf-8")
        runs[run.name] = run
    threads = ["--threads", "1"] if jobs > 1 else []

    def command(stage: Stage) -> list[str]:
        config = layout.candidate_configs / f"{stage.key}.yaml"
        return [sys.executable, "-m", "opct.cli", "train", "-c", str(config), "--no-progress", *threads]

    run_stages([Stage("train", name) for name in runs], jobs, command, lambda stage: layout.stage_log(stage.name),
               log, env=worker_environment() if jobs > 1 else None,
               finished=lambda stage: already_trained(runs[stage.key]))  # a rerun starts no process for these


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values and not any(math.isnan(v) for v in values) else math.nan


def score_candidates(cfg: SelectionConfig, attack: bool | None = None, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Read every candidate's validation records, run the family rule's attack (``attack``: by default
    ``selection.family_attack.enabled``), apply the rules, and return ``selection.json``'s content."""
    s = cfg.selection
    runs = candidate_configs(cfg)
    records: dict[str, dict[int, dict[int, dict[str, Any]]]] = {}  # cid -> seed -> step -> record
    info: dict[str, tuple[str, dict[str, Any]]] = {}
    for cid, method, recipe, run in runs:  # each candidate's records verified first: a damaged one never decides
        records.setdefault(cid, {})[run.seed] = candidate_records(run.run_dir, candidate_name(cid, run.seed))
        info[cid] = (method, recipe)
    first = next(iter(next(iter(records.values())).values()))[0]
    tasks = sorted(k for k in first if k.startswith("val_cap/"))
    base = {t: _mean([recs[0][t] for by_seed in records.values() for recs in by_seed.values()]) for t in tasks}
    candidates = []
    for cid, by_seed in records.items():
        method, recipe = info[cid]
        steps = {}
        for step in range(s.every, s.steps + 1, s.every):
            at = [by_seed[seed][step] for seed in s.seeds if step in by_seed.get(seed, {})]
            if len(at) < len(s.seeds):
                raise ValueError(f"candidate {cid} has no validation record at step {step} for every seed: rerun `opct select`")
            eligible = all(r[t] >= base[t] - s.capability_drop - 1e-12 for r in at for t in tasks)
            steps[step] = {
                "val_teacher_kl": _mean([r["val_teacher_kl"] for r in at]),
                "val_teacher_kl_by_seed": [r["val_teacher_kl"] for r in at],
                "val_good": _mean([r.get("val_good", math.nan) for r in at]),
                "val_good_by_seed": [r.get("val_good", math.nan) for r in at],
                "famval_good": _mean([r.get("famval_good", math.nan) for r in at]),
                "famval_good_by_seed": [r.get("famval_good", math.nan) for r in at],
                "famval_good_by_axis": famval_rates(at),
                "val_cap": {t: _mean([r[t] for r in at]) for t in tasks},
                "eligible": eligible,
                "compute": {k: _mean([run_compute(candidate_dir(cfg, cid, seed), step, declared=declared_compute)[k]
                                      for seed in s.seeds])
                            for k in ("tokens_generated", "tokens_teacher_scored", "tokens_backpropagated", "train_seconds")},
            }
        candidates.append({"id": cid, "method": method, "recipe": recipe, "steps": steps})
    attacked = s.family_attack.enabled if attack is None else attack
    family_cost = attack_candidates(runs, candidates, s.family_attack, log) if attacked else None
    score_steps(candidates, attacked)
    chosen = {method: {rule: pick(candidates, method, rule) for rule in PICK_RULES} for method in sorted(s.grid)}
    for choice in (c for by_rule in chosen.values() for c in by_rule.values() if c is not None):
        choice["rollouts_degenerated"] = degenerated_seeds(cfg, choice)
    return {
        "rules": RULES, "model": cfg.model.name_or_path, "fixed_before_heldout": True, "capability_drop": s.capability_drop,
        "seeds": s.seeds, "steps": s.steps, "every": s.every, "pairs_per_step": runs[0][3].train.pairs_per_step,
        "budget": {m: sum(c["method"] == m for c in candidates) for m in sorted(s.grid)},
        "base_validation": {"val_cap": base, "val_teacher_kl": _mean([recs[0]["val_teacher_kl"] for by in records.values() for recs in by.values()]),
                            "val_good": _mean([recs[0].get("val_good", math.nan) for by in records.values() for recs in by.values()])},
        "family_validation": family_validation_info(cfg), "family_attack": family_cost,
        "candidates": candidates, "chosen": chosen,
        "method_settings": {rule: {m: recipe_tree(chosen[m][rule]) for m in chosen if chosen[m][rule]}
                            for rule in PICK_RULES},
    }


def pick(candidates: list[dict[str, Any]], method: str, rule: str) -> dict[str, Any] | None:
    """The (candidate, step) ``rule`` chooses for ``method`` among eligible ones, or None when none is eligible."""
    rows = [(c, step, m) for c in candidates if c["method"] == method for step, m in c["steps"].items() if m["eligible"]]
    if rule == "family_transfer":  # a step the rule could not score (unattacked, unmeasured) is never picked
        rows = [row for row in rows if not math.isnan(row[2].get("family_score", math.nan))]
    if not rows:
        return None
    if rule == "teacher_kl":
        key = lambda row: (row[2]["val_teacher_kl"], row[1], row[0]["id"])  # noqa: E731
    elif rule == "family_transfer":
        key = lambda row: (-row[2]["family_score"], row[2]["val_teacher_kl"], row[1], row[0]["id"])  # noqa: E731
    else:
        key = lambda row: (-_nan_low(row[2]["val_good"]), row[2]["val_teacher_kl"], row[1], row[0]["id"])  # noqa: E731
    c, step, m = min(rows, key=key)
    kl, good = m["val_teacher_kl_by_seed"], m["val_good_by_seed"]
    return {"candidate": c["id"], "step": step, "recipe": c["recipe"], "val_teacher_kl": m["val_teacher_kl"],
            "val_good": m["val_good"], "famval_good": m.get("famval_good", math.nan),
            "family_score": m.get("family_score", math.nan), "family_attack": m.get("family_attack"),
            "val_cap": m["val_cap"], "compute": m["compute"],
            "seed_spread": {"val_teacher_kl": [min(kl), max(kl)], "val_good": [min(good), max(good)]}}


def degenerated_seeds(cfg: SelectionConfig, choice: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{"seed", "warning"}]`` for every seed of a pick whose own rollouts had degenerated by its step
    (:func:`~opct.report.rollout_health.rollout_collapse` on the candidate's ``metrics.jsonl`` up to that
    step): the pick still stands, but its greedy validation may hide the collapse."""
    out = []
    for seed in cfg.selection.seeds:
        path = RunLayout(candidate_dir(cfg, choice["candidate"], seed)).metrics
        records = [r for r in _read_jsonl(path) if r.get("step", 0) <= choice["step"]] if path.is_file() else []
        if (collapse := rollout_collapse(records)) is not None:
            out.append({"seed": seed, "warning": collapse.sentence()})
    return out


def _nan_low(value: float) -> float:
    return -math.inf if math.isnan(value) else value


def recipe_tree(choice: dict[str, Any] | None) -> dict[str, Any]:
    """A chosen recipe as the nested settings an experiment's ``method_settings.<method>`` takes."""
    tree: dict[str, Any] = {}
    if choice is None:
        return tree
    for key, value in choice["recipe"].items():
        _set_path(tree, key, value)
    _set_path(tree, "train.max_steps", choice["step"])
    return tree


def run_selection(cfg: SelectionConfig, jobs: int = 1, log: Callable[[str], Any] = print) -> Path:
    """Train the candidates (resumable), score them, and write ``selection.json``; returns its path."""
    root = cfg.root
    root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(SelectionLayout(root).manifest, build_manifest("selection", cfg.model_dump(mode="json")))
    run_candidates(cfg, jobs, log)
    result = score_candidates(cfg, log=log)
    path = SelectionLayout(root).selection
    write_json_atomic(path, finite_or_null(result))  # an unmeasured number is null: strict JSON
    return path


def family_validation_info(cfg: SelectionConfig) -> dict[str, Any]:
    """Per axis, the families held back from training as the family validation split (what the
    ``family_transfer`` rule reads, and what every run of this selection and its comparison trains without)."""
    views = {a: organism_view(AXES.get(a)) for a in cfg.axes}
    return {a: {"key": v.family_key, "families": list(v.validation_families)} for a, v in views.items() if v.validation_families}
