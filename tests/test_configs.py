"""Every shipped configuration validates, and the organism ones train."""

from pathlib import Path

import pytest
from conftest import REPO

from opct.config import load_config
from opct.training.loop import train

#: Run configurations (``opct train --config``); ``*_experiment.yaml`` are experiments (``opct run``).
CONFIGS = sorted(p for p in (REPO / "configs").glob("*.yaml") if not p.stem.endswith("_experiment"))
EXPERIMENTS = sorted((REPO / "configs").glob("*_experiment.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_validates(path: Path):
    cfg = load_config(path)
    assert cfg.name and cfg.data.train


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.name for p in EXPERIMENTS])
def test_experiment_validates(path: Path):
    from opct.experiments.runner import load_experiment, resolve

    plan = resolve(load_experiment(path))
    assert plan.runs and plan.experiment.attack.enabled


@pytest.mark.parametrize("name", ["organism_opct.yaml", "organism_bct.yaml"])
def test_organism_configs_run(name, tmp_path):
    cfg = load_config(REPO / "configs" / name, [f"output_dir={tmp_path}", "train.max_steps=2", "train.pairs_per_step=4"])
    result = train(cfg, show_progress=False)
    assert (result.final_dir / "adapter_model.safetensors").exists()
