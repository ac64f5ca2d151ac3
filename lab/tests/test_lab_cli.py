"""The library refuses a study, a selection and a study's report with exit 2, naming the lab's command; the lab's
commands run them."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import opct_lab.cli
from opct.cli.main import app as opct_app
from opct_lab.cli import app as lab_app

STUDIES = Path(str(files("opct_lab") / "studies"))
DEMO = Path(str(files("opct") / "experiments" / "organism_demo.yaml"))


def _text(output: str) -> str:
    return " ".join(output.split())


def test_opct_run_of_a_study_file_names_opct_lab_run():
    study = STUDIES / "organism_demo_full.yaml"
    res = CliRunner().invoke(opct_app, ["run", str(study), "--dry-run"], terminal_width=300)
    assert res.exit_code == 2 and f"opct-lab run {study}" in _text(res.output), res.output
    res = CliRunner().invoke(lab_app, ["run", str(study), "--dry-run"], terminal_width=300)
    assert res.exit_code == 0 and "study organism-demo-full" in res.output, res.output


def test_opct_select_is_no_command_and_its_error_names_opct_lab_select():
    selection = STUDIES / "organism_selection.yaml"
    res = CliRunner().invoke(opct_app, ["select", str(selection), "--set", "x=1"], terminal_width=300)
    said = _text(res.output.replace("│", " "))
    assert res.exit_code == 2 and "No such command 'select'" in said, res.output
    assert f"`opct-lab select {selection} --set x=1`" in said, res.output  # the same arguments, to run in the lab
    group = typer.main.get_command(opct_app)
    assert "select" not in group.list_commands(typer.Context(group))  # the library's command list has no select
    res = CliRunner().invoke(lab_app, ["select", str(selection), "--dry-run"], terminal_width=300)
    assert res.exit_code == 0 and "candidate runs; selection.json in" in res.output, res.output


def test_opct_demo_is_the_quick_demo_alone():
    res = CliRunner().invoke(opct_app, ["demo", "--full", "--dry-run"])
    assert res.exit_code == 2 and "--full" in res.output
    res = CliRunner().invoke(opct_app, ["demo", "--dry-run"], terminal_width=300)
    assert res.exit_code == 0 and "organism-demo" in res.output and "study" not in res.output, res.output


def test_opct_report_of_a_study_names_opct_lab_report_and_the_lab_refuses_an_experiment(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    (study / "manifest.json").write_text(json.dumps({"kind": "study", "config": {}}))
    res = CliRunner().invoke(opct_app, ["report", str(study)], terminal_width=300)
    assert res.exit_code == 2 and f"opct-lab report {study}" in _text(res.output), res.output
    res = CliRunner().invoke(lab_app, ["report", str(tmp_path)], terminal_width=300)
    assert res.exit_code == 2 and "is not a study" in res.output, res.output


@pytest.mark.parametrize("command, name", [("demo", "organism_demo.yaml"), ("demo-full", "organism_demo_full.yaml")])
def test_the_labs_demos_pass_jobs_and_a_rule_through(command, name, monkeypatch):
    seen: list[tuple] = []
    monkeypatch.setattr(opct_lab.cli, "run_experiment_file", lambda *a, **k: seen.append((a, k)))
    monkeypatch.setattr(opct_lab.cli, "run_study_file", lambda *a, **k: seen.append((a, k)))
    res = CliRunner().invoke(lab_app, [command, "--jobs", "3", "--rule", "good_behaviour", "--dry-run"])
    assert res.exit_code == 0, res.output
    ((args, kwargs),) = seen
    assert args[0].name == name and kwargs["jobs"] == 3 and any(o.endswith("-good-behaviour") for o in args[1])
    res = CliRunner().invoke(lab_app, [command, "--rule", "nobody", "--dry-run"])
    assert res.exit_code == 2 and "teacher_kl" in res.output
