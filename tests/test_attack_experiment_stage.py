"""An experiment's attack stage runs the attacker registered as ``search`` in ``ATTACKERS``, through the same
``AttackConfig`` as ``opct attack``: one per model, carrying the experiment's settings."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from opct.attack.attackers import ATTACKERS, AttackConfig
from opct.attack.experiment_stage import attack_models
from opct.config import ModelConfig
from opct.experiments.runner import load_experiment


class RecordingSearch:
    """Stands in for the search attacker: records each config and writes an incomplete attack's results."""

    name: ClassVar[str] = "search"
    seen: ClassVar[list[AttackConfig]] = []

    def check(self, config: Any) -> None:
        pass

    def rounds(self, config: Any) -> int:
        return config.budget

    def run(self, config: Any, progress: Callable[[int, int], None] | None = None) -> Path:
        RecordingSearch.seen.append(config)
        config.out.mkdir(parents=True)
        path = config.out / "results.json"
        path.write_text(json.dumps({"status": "incomplete", "n": 4, "outcomes": {"behaviors": {"unscored": 3}}}))
        return path


def test_the_attack_stage_runs_the_registered_search_attacker_with_the_experiments_settings(tmp_path):
    cfg = load_experiment(None, [f"output_dir={tmp_path}", "attack.enabled=true", "attack.budget=3",
                                 "attack.static_baseline=false", "attack.search={top_k: 2}",
                                 "attack.generation.max_new_tokens=8"])
    models = {"base": ModelConfig(name_or_path="organism"), "bct": ModelConfig(name_or_path=str(tmp_path / "bct"))}
    RecordingSearch.seen.clear()
    ATTACKERS.register("search", RecordingSearch, replace=True)
    try:
        unfinished = attack_models(cfg, models, tmp_path / "attack", log=lambda line: None, show_progress=False)
    finally:
        ATTACKERS.register("search", "opct.attack.run:SearchAttack", replace=True)
    assert unfinished == ["attack/base: 3 of 4 behaviours unscored", "attack/bct: 3 of 4 behaviours unscored"]
    assert [c.target_spec() for c in RecordingSearch.seen] == list(models.values())
    assert [c.out for c in RecordingSearch.seen] == [tmp_path / "attack" / "base", tmp_path / "attack" / "bct"]
    for config in RecordingSearch.seen:
        assert config.strategy == "search" and config.budget == 3 and config.static is False
        assert config.search == {"top_k": 2} and config.discard_stale
        assert config.target_generation() == cfg.attack.generation and config.target_generation().max_new_tokens == 8
        assert config.data == cfg.eval.data and config.max_unscored == cfg.eval.max_unscored


def test_a_search_setting_the_search_attacker_does_not_have_is_refused_by_the_config():
    with pytest.raises(ValidationError, match="unknown search setting"):
        AttackConfig(search={"beam": 3})
    with pytest.raises(ValidationError, match="no search settings"):
        AttackConfig(strategy="model", attacker="organism", search={"top_k": 2})
