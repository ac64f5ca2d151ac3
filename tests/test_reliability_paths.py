"""No config value makes opct write outside the folder it names: every value that becomes a path component
(a run's name, the tracker project, entity and tags, a study's families and levels) is checked by one rule,
``opct.config.check_path_component``, and refused naming the file, the field and why."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_config
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import ConfigError, RunConfig, check_path_component, validate_config
from opct_lab.study.config import load_study

FULL = Path(__file__).resolve().parents[1] / "lab" / "opct_lab" / "studies" / "organism_demo_full.yaml"


@pytest.mark.parametrize("value", ["../../../escaped", "a/b", ".hidden", "..", "with space", ""])
def test_a_path_component_is_one_plain_folder_name(value: str) -> None:
    with pytest.raises(ValueError, match="not a usable name"):
        check_path_component(value)


def test_the_tracker_path_probe_writes_nothing_outside_the_run(tiny_model, pairs_file, tmp_path: Path, monkeypatch) -> None:
    """Issue 61's probe: ``train.tracker_project=../../../escaped`` with TensorBoard is refused before anything
    is written, naming the field."""
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    import yaml

    cfg = work / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(run_config(tiny_model, pairs_file, work / "runs")))
    res = CliRunner().invoke(app, ["train", "--no-progress", "-c", str(cfg), "--set", "train.trackers=[tensorboard]",
                                   "--set", "train.tracker_project=../../../escaped"])
    assert res.exit_code == 2, res.output
    assert "train.tracker_project" in res.output and "'../../../escaped' is not a usable name" in res.output
    assert not (tmp_path / "escaped").exists() and not (work / "runs").exists()


@pytest.mark.parametrize(("field", "value"), [
    ("name", "../x"),
    ("train.tracker_project", "../../escaped"),
    ("train.tracker_entity", "team/../../x"),
    ("train.tracker_tags", ["ok-tag", "../x"]),
])
def test_each_run_field_that_becomes_a_path_is_checked(field: str, value, tmp_path: Path) -> None:
    tree = run_config(Path("organism"), tmp_path / "p.jsonl", tmp_path / "out")
    section, _, key = field.rpartition(".")
    (tree.setdefault(section, {}) if section else tree)[key] = value
    with pytest.raises(ConfigError) as caught:
        validate_config(RunConfig, tree, "my.yaml")
    message = str(caught.value)
    assert message.startswith("my.yaml: ") and field in message and "not a usable" in message


@pytest.mark.parametrize(("override", "field"), [
    ("families={../up: organism}", "families"),
    ("levels={../w4: [llama]}", "levels"),
])
def test_study_families_and_levels_are_checked(override: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_study(FULL, ["family_picks={}", override])
    message = str(caught.value)
    # the value came from --set, so the error names that argument as where it came from (issue 60: file:line or --set)
    assert message.startswith(f"--set {override}: ") and f"{field}:" in message and "'../" in message
    assert "not a usable" in message
