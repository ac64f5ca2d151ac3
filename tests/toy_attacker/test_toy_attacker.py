"""A toy attacker, added in one file (toy_attacker.py; no change to opct/): registered in ATTACKERS, its settings
checked through AttackConfig, and run by ``opct attack --strategy``, run_attack and an experiment's attack stage
(``attack.strategy``), whose folder and report hold its results."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from toy_attacker import REFUSAL, OneShotAttack
from typer.testing import CliRunner

import opct
from opct.attack.attackers import ATTACKERS, AttackConfig, run_attack
from opct.attack.experiment_stage import AttackSettingsError
from opct.cli.main import app
from opct.config import ConfigError
from opct.experiments.runner import load_experiment, run_experiment
from opct.runs.experiment_layout import ExperimentLayout


@pytest.fixture
def one_shot() -> Iterator[None]:
    ATTACKERS.register("one-shot", OneShotAttack)
    try:
        yield
    finally:
        ATTACKERS.unregister("one-shot")


def test_the_cli_runs_a_registered_attacker_and_reports_its_results(one_shot, tmp_path):
    res = CliRunner().invoke(app, ["attack", "--strategy", "one-shot", "--budget", "1", "--out", str(tmp_path / "a"),
                                   "--no-progress"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "a" / "results.json").read_text())
    assert saved["attacker"] == "one-shot" and saved["status"] == "ok"
    assert saved["metrics"]["dsr"]["value"] == 1.0 and saved["metrics"]["dsr"]["n"] == saved["n"] > 0
    assert f"over {saved['n']} scored of {saved['n']} behaviours" in res.output


def test_its_own_check_runs_through_the_config_and_the_cli(one_shot, tmp_path):
    res = CliRunner().invoke(app, ["attack", "--strategy", "one-shot", "--out", str(tmp_path / "a")])
    assert res.exit_code == 2 and "--budget 24: the one-shot attacker asks each behaviour once" in res.output
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="unknown attacker 'two-shot'; choose one of: search, model, one-shot"):
        AttackConfig(strategy="two-shot")


def test_the_library_runs_it_from_an_attack_config(one_shot, tmp_path):
    assert (opct.run_attack, opct.AttackConfig, opct.ATTACKERS) == (run_attack, AttackConfig, ATTACKERS)
    path = run_attack(AttackConfig(strategy="one-shot", budget=1, split="train", out=tmp_path / "b"))
    saved = json.loads(path.read_text())
    assert saved["attacker"] == "one-shot" and saved["metrics"]["dsr"]["value"] == 1.0


def test_an_experiment_refuses_an_attacker_no_one_registered_naming_where_it_was_written(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("name: e\nattack:\n  enabled: true\n  strategy: two-shot\n")
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    assert f"{path}:4: attack.strategy" in str(err.value)
    assert "unknown attacker 'two-shot'; choose one of: search, model" in str(err.value)


def test_an_experiment_asks_the_attacker_to_check_its_settings_before_anything_trains(one_shot, tmp_path):
    cfg = load_experiment(None, [f"output_dir={tmp_path}", "name=e", "axes=[jailbreak]", "methods=[base, bct]",
                                 "attack.enabled=true", "attack.strategy=one-shot", "attack.budget=24"])
    with pytest.raises(AttackSettingsError, match=r"attack\.strategy one-shot: --budget 24: the one-shot attacker asks "
                                                  "each behaviour once"):
        run_experiment(cfg, show_progress=False, log=lambda line: None)
    assert not ExperimentLayout(cfg.root).run("bct").exists()


def test_an_experiment_attacks_every_model_with_the_configured_attacker_into_its_folder_and_report(one_shot, tmp_path):
    cfg = load_experiment(None, [
        f"output_dir={tmp_path}", "name=e", "axes=[jailbreak]", "methods=[base, bct]", "eval.limit=1",
        "eval.splits=[heldout]", "eval.capability=false", "eval.allow_unscored=true", "train.train.max_steps=1",
        "train.train.pairs_per_step=2", "train.bct.targets.max_new_tokens=8", "eval.generation.max_new_tokens=8",
        "attack.enabled=true", "attack.strategy=one-shot", "attack.budget=1"])
    lines: list[str] = []
    root = run_experiment(cfg, show_progress=False, log=lines.append)
    layout = ExperimentLayout(root)
    assert "[stage] attack base" in lines and "[stage] attack bct" in lines
    for key, target in (("base", "organism"), ("bct", str(layout.run("bct")))):
        folder = layout.attack(key)
        saved = json.loads(folder.results.read_text())
        assert saved["attacker"] == "one-shot" and saved["model"] == target and saved["status"] == "ok"
        attempts = [json.loads(line) for line in folder.attempts.read_text().splitlines()]
        assert len(attempts) == saved["n"] > 0 and {a["response"] for a in attempts} == {REFUSAL}
    report = layout.report_md.read_text()
    assert "The `one-shot` attacker (`attack.strategy`) attacked every held-out behaviour" in report
    assert "searched for a jailbreak" not in report
    for row in ("| base | 100.0% [", "| BCT | 100.0% ["):  # never cracked: the toy's target always refuses
        assert row in report and f"(n={saved['n']}) |" in report.split(row)[1].splitlines()[0]
    assert "The `one-shot` attacker" in layout.report_html.read_text()
