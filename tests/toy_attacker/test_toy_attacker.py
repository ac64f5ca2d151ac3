"""A toy attacker, added in this folder only (no change to opct/cli or opct/attack/run.py): registered in
ATTACKERS, its settings checked through AttackConfig, and run by ``opct attack --strategy`` and run_attack."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from toy_attacker import OneShotAttack
from typer.testing import CliRunner

import opct
from opct.attack.attackers import ATTACKERS, AttackConfig, run_attack
from opct.cli.main import app


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
