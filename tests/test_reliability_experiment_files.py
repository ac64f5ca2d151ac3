"""Experiment files read as written: ``extends:`` chains resolve fully, a cycle is an error naming the
files, and the resolved settings can be printed (``opct run FILE --print-config``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import ConfigError
from opct.experiments.runner import load_experiment

DEMO = Path(__file__).resolve().parents[1] / "opct" / "experiments" / "organism_demo.yaml"


def _write(path: Path, tree: dict) -> Path:
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    return path


def test_a_nested_extends_keeps_every_level(tmp_path: Path) -> None:
    _write(tmp_path / "mid.yaml", {"extends": str(DEMO), "name": "mid", "seeds": [0, 1]})
    chain = _write(tmp_path / "chain.yaml", {"extends": "mid.yaml", "name": "chain"})
    mid, nested = load_experiment(tmp_path / "mid.yaml"), load_experiment(chain)
    assert nested.attack.enabled and nested.seeds == [0, 1]  # the demo's attack, mid's seeds
    assert nested.method_settings == mid.method_settings and nested.method_settings["opct"]["optim"]["lr"] == 0.0003
    assert nested.model_dump(exclude={"name"}) == mid.model_dump(exclude={"name"})


def test_an_extends_cycle_is_an_error_naming_the_files(tmp_path: Path) -> None:
    _write(tmp_path / "a.yaml", {"extends": "b.yaml", "name": "a"})
    _write(tmp_path / "b.yaml", {"extends": "a.yaml", "name": "b"})
    with pytest.raises(ConfigError, match=r"cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        load_experiment(tmp_path / "a.yaml")
    _write(tmp_path / "self.yaml", {"extends": "self.yaml"})
    res = CliRunner().invoke(app, ["run", str(tmp_path / "self.yaml"), "--dry-run"], terminal_width=200)
    assert res.exit_code == 2 and "cycle" in res.output


def test_print_config_shows_the_resolved_chain(tmp_path: Path) -> None:
    _write(tmp_path / "mid.yaml", {"extends": str(DEMO), "name": "mid"})
    chain = _write(tmp_path / "chain.yaml", {"extends": "mid.yaml", "name": "chain"})
    res = CliRunner().invoke(app, ["run", str(chain), "--print-config", "--set", "seeds=[3]"], terminal_width=200)
    assert res.exit_code == 0, res.output
    printed = yaml.safe_load(res.output)
    assert printed["name"] == "chain" and printed["seeds"] == [3]
    assert printed["method_settings"]["bct"]["train"]["max_steps"] == 180 and printed["attack"]["enabled"] is True


def test_a_file_extending_a_study_is_a_study(tmp_path: Path) -> None:
    from opct.experiments.study import is_study_file

    full = DEMO.with_name("organism_demo_full.yaml")
    chain = _write(tmp_path / "mine.yaml", {"extends": str(full), "name": "mine", "seeds": [0]})
    assert is_study_file(chain) and not is_study_file(DEMO)
    res = CliRunner().invoke(app, ["run", str(chain), "--print-config"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert set(yaml.safe_load(res.output)["families"]) == {"llama", "qwen3", "gpt2"}
