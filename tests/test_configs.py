"""Every shipped configuration validates, and the organism ones train."""

from pathlib import Path

import pytest
from conftest import REPO

from opct.config import load_config
from opct.train import train

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_validates(path: Path):
    cfg = load_config(path)
    assert cfg.name and cfg.data.train


@pytest.mark.parametrize("name", ["organism_opct.yaml", "organism_bct.yaml"])
def test_organism_configs_run(name, tmp_path):
    cfg = load_config(REPO / "configs" / name, [f"output_dir={tmp_path}", "train.max_steps=2", "train.pairs_per_step=4"])
    result = train(cfg, show_progress=False)
    assert (result.final_dir / "adapter_model.safetensors").exists()
