"""An experiment's stages, one at a time: evaluate a model, train a run, attack a model.

:func:`opct.experiments.runner.run_experiment` runs them in order in its own process (``--jobs 1``), or
hands each to a worker process (``--jobs N``, :mod:`opct.experiments.parallel`) that runs exactly one
(:func:`opct.experiments.runner.run_stage`). Either way a stage is the same call with the same inputs, so
it writes the same files. :func:`stage_graph` says what each stage waits for: a model's eval and attack
wait for its training run; the base model's and the training runs wait for nothing; the report (not a
stage here) waits for all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.attack.experiment_stage import attack_models
from opct.config import ModelConfig, RunConfig
from opct.experiments.invalidation import Force, already_trained, clear, forced, train_stage
from opct.runs.experiment_layout import AttackFolder, EvalFolder, ExperimentLayout
from opct.training.tracking import log_to_run, result_metrics

#: The kinds of stage, as ``--force`` and ``--stage`` name them (``train:opct``, ``eval:base``, ``attack:bct``).
STAGE_KINDS = ("train", "eval", "attack")


@dataclass(frozen=True)
class Stage:
    """One stage of an experiment: its kind (``train``, ``eval``, ``attack``), the plan row it is for,
    and the names of the stages it waits for."""

    kind: str
    key: str
    after: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``kind:key``, as ``--force`` and ``--stage`` name it."""
        return f"{self.kind}:{self.key}"


def stage_graph(models: Sequence[str], runs: Sequence[str], attack: bool) -> list[Stage]:
    """Every stage of a plan but the report, in the order ``--jobs 1`` runs them: the base model's eval,
    each training run, each trained model's eval, then every model's attack (when ``attack``). A trained
    model's eval and attack wait for its training run; the others wait for nothing."""
    stages = [Stage("eval", "base")] if "base" in models else []
    stages += [Stage("train", key) for key in runs]
    stages += [Stage("eval", key, (f"train:{key}",)) for key in models if key != "base"]
    if attack:
        stages += [Stage("attack", key, () if key == "base" else (f"train:{key}",)) for key in models]
    return stages


class ExperimentStages:
    """The stages of one resolved experiment: ``models`` (plan row -> model spec or trained run folder),
    ``runs`` (plan row -> its run config), the eval ``tasks`` every model gets, and the ``forces``
    (``--force``) to apply; ``log`` takes the ``[stage]`` lines."""

    def __init__(self, cfg: Any, models: dict[str, str], runs: dict[str, RunConfig], tasks: list[Any],
                 forces: Sequence[Force] = (), show_progress: bool = True, log: Any = print) -> None:
        self.cfg, self.models, self.runs, self.tasks = cfg, models, runs, tasks
        self.forces, self.show_progress, self.log = list(forces), show_progress, log
        self.layout = ExperimentLayout(cfg.root)
        # the base with the experiment's full model spec; a trained run with the spec its checkpoint records
        # (remote code only as this experiment file allows it: a checkpoint never turns it on)
        self.specs = {key: cfg.model if key == "base" else ModelConfig(
            name_or_path=path, device=cfg.model.device, trust_remote_code=cfg.model.trust_remote_code)
            for key, path in models.items()}

    def evaluate(self, key: str, track: bool = True) -> list[str]:
        """Evaluate one model (resumable, stale results measured again); returns its incomplete evals'
        lines. ``track``: log a trained model's results into its run's trackers."""
        # deferred: loads torch and transformers only when called
        from opct.evals.suite import evaluate, incomplete

        folder = self.layout.eval(key).root
        if forced(self.forces, "eval", key) and clear(folder):
            self.log(f"[stage] evaluate {key}: forced (--force), its results deleted")
        self.log(f"[stage] evaluate {key}")
        e = self.cfg.eval
        results = evaluate(self.specs[key], self.tasks, folder, e.generation, seed=e.seed, show_progress=self.show_progress,
                           reasoning=e.reasoning, max_unscored=e.max_unscored, discard_stale=True)  # retrained: measured again
        if track and key != "base":
            track_results(Path(self.models[key]), "eval", folder)
        return [f"{key}/{line}" for line in incomplete(results)]

    def train(self, key: str) -> None:
        """Train (or skip, resume or train again) one run of the plan (:func:`~opct.experiments.invalidation.train_stage`)."""
        train_stage(key, self.runs[key], self.cfg.root, forced(self.forces, "train", key), self.show_progress, self.log)

    def attack(self, keys: Sequence[str], track: bool = True) -> list[str]:
        """Attack the models ``keys`` (forced ones from scratch); returns the incomplete attacks' lines."""
        for key in keys:
            if forced(self.forces, "attack", key) and clear(self.layout.attack(key).root):
                self.log(f"[stage] attack {key}: forced (--force), its results deleted")
        unfinished = attack_models(self.cfg, {k: self.specs[k] for k in keys}, self.layout.attacks, log=self.log,
                                   show_progress=self.show_progress)
        if track:
            self.track(keys, evals=False)
        return unfinished

    def track(self, keys: Sequence[str], evals: bool = True, attacks: bool = True) -> None:
        """Log the trained models' eval and attack results into their runs' trackers (evals first)."""
        trained = [k for k in keys if k != "base"]
        for namespace, on in (("eval", evals), ("attack", attacks and self.cfg.attack.enabled)):
            for key in trained if on else []:
                folder = self.layout.eval(key).root if namespace == "eval" else self.layout.attack(key).root
                track_results(Path(self.models[key]), namespace, folder)

    def run_in_order(self) -> list[str]:
        """Every stage in this process, one after another (``--jobs 1``); returns the incomplete lines."""
        unfinished = self.evaluate("base") if "base" in self.models else []
        for key in self.runs:
            self.train(key)
        for key in self.models:
            if key != "base":
                unfinished += self.evaluate(key)
        if self.cfg.attack.enabled:
            unfinished += self.attack(list(self.models))
        return unfinished

    def finished(self, stage: Stage) -> bool:
        """Whether ``stage`` is a training run that is complete with these settings and not forced: what
        :meth:`train` would skip, so ``--jobs N`` keeps it without starting a worker. Evals and attacks
        are always handed to a worker, which measures only what is missing or stale."""
        return stage.kind == "train" and already_trained(self.runs[stage.key], forced(self.forces, "train", stage.key))

    def run(self, stage: Stage) -> list[str]:
        """One stage, as a worker of ``--jobs N`` runs it: nothing is logged into a run's trackers (the
        experiment's own process does that once every stage is done); returns the incomplete lines."""
        if stage.kind == "train":
            self.train(stage.key)
            return []
        if stage.kind == "eval":
            return self.evaluate(stage.key, track=False)
        return self.attack([stage.key], track=False)


def track_results(run_dir: Path, namespace: str, folder: Path) -> None:
    """Log an eval's (``eval/<eval>/<metric>``) or attack's (``attack/<metric>``) results into the
    trackers of the training run they measured, when it has any (:mod:`opct.training.tracking`)."""
    files = EvalFolder(folder).results_files() if namespace == "eval" else [AttackFolder(folder).results]
    results = {(f.parent.name if namespace == "eval" else ""): json.loads(f.read_text(encoding="utf-8"))
               for f in files if f.is_file()}
    log_to_run(run_dir, result_metrics(namespace, results))
