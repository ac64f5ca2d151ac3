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


def test_a_file_extending_a_study_is_a_study_and_runs_in_the_lab(tmp_path: Path) -> None:
    """opct run refuses a study file (exit 2) naming the lab's command; opct-lab run reads it."""
    from opct_lab.cli import _is_study_file as is_study_file
    from opct_lab.cli import app as lab_app

    full = Path(__file__).resolve().parents[1] / "lab" / "opct_lab" / "studies" / "organism_demo_full.yaml"
    chain = _write(tmp_path / "mine.yaml", {"extends": str(full), "name": "mine", "seeds": [0]})
    assert is_study_file(chain) and not is_study_file(DEMO)
    res = CliRunner().invoke(app, ["run", str(chain), "--print-config"], terminal_width=200)
    assert res.exit_code == 2 and f"opct-lab run {chain}" in " ".join(res.output.split()), res.output
    res = CliRunner().invoke(lab_app, ["run", str(chain), "--print-config"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert set(yaml.safe_load(res.output)["families"]) == {"llama", "qwen3", "gpt2"}


def test_print_config_resolves_the_train_block_into_each_run(tmp_path: Path) -> None:
    """Each training run is printed as it will train: the shared train: block, the method's own recipe and
    every default, while the printed experiment still reads back as the same experiment."""
    from opct.experiments.runner import resolve

    res = CliRunner().invoke(app, ["run", str(DEMO), "--print-config", "--set", "train.optim.weight_decay=0.01"],
                             terminal_width=200)
    assert res.exit_code == 0, res.output
    comments = [line[2:] for line in res.output.splitlines() if line.startswith("# ") and not line.startswith("# Each")]
    runs = yaml.safe_load("\n".join(comments))["runs"]
    assert set(runs) == {"bct", "opct"}
    assert runs["bct"]["optim"]["lr"] == 0.0002 and runs["opct"]["optim"]["lr"] == 0.0003  # method_settings
    assert runs["opct"]["optim"]["weight_decay"] == 0.01 == runs["bct"]["optim"]["weight_decay"]  # train: (--set)
    assert runs["opct"]["lora"]["r"] == 16 and runs["opct"]["optim"]["betas"] == [0.9, 0.95]  # file, then default
    assert runs["opct"]["opct"]["loss"]["kl_coef"] == 1.0 and "bct" in runs["bct"] and "opct" not in runs["bct"]
    expected = {r.key: r.config.model_dump(mode="json") for r in resolve(load_experiment(DEMO, ["train.optim.weight_decay=0.01"])).runs}
    assert runs == expected
    printed = tmp_path / "printed.yaml"
    printed.write_text(res.output, encoding="utf-8")
    again = {r.key: r.config.model_dump(mode="json") for r in resolve(load_experiment(printed)).runs}
    assert again == expected  # the printed file is the same experiment


def test_an_empty_experiment_file_is_an_error_not_a_default_experiment(tmp_path) -> None:
    """Issue 73: an empty file (or one of comments alone) planned a full default experiment with exit 0."""
    from typer.testing import CliRunner

    from opct.cli.main import app

    for text in ("", "# nothing here yet\n"):
        path = tmp_path / "empty.yaml"
        path.write_text(text, encoding="utf-8")
        res = CliRunner().invoke(app, ["run", str(path), "--dry-run"])
        assert res.exit_code == 2, res.output
        assert "empty.yaml: the experiment file is empty (no settings)" in res.output
