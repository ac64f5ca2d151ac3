"""A report computed only from what it verified, and written only where opct owns the folder.

Each case fabricates a finished experiment (``opct.testing.synthetic_experiment.make_experiment``) and damages it
as a careless or hostile hand would: a samples file cut mid-record, an impossible rate, a training run,
a folder of someone else's files, an empty folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from report_fixtures import write
from typer.testing import CliRunner

from opct.cli.main import app
from opct.report import load_experiment
from opct.report.paired import paired_table
from opct.report.table import build_table
from opct.testing.synthetic_experiment import make_experiment


def _report(*args: str) -> object:
    return CliRunner().invoke(app, ["report", *map(str, args)], terminal_width=200)


def _paired_cell(exp_dir: Path, label: str, header_start: str) -> str:
    exp = load_experiment(exp_dir)
    headers, rows = paired_table(exp, build_table(exp).columns)
    col = next(i for i, h in enumerate(headers) if h.startswith(header_start))
    return next(r[col] for r in rows if r[0] == label)


def test_a_cut_samples_file_marks_its_paired_differences(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path / "exp", samples=True)
    intact = _paired_cell(exp, "OPCT − BCT", "Sycophancy")
    assert "INCOMPLETE" not in intact and "(k=40)" in intact
    samples = exp / "eval" / "opct" / "sycophancy" / "samples.jsonl"
    samples.write_bytes(samples.read_bytes()[:5000])  # mid-record; results.json left as it is
    cut = _paired_cell(exp, "OPCT − BCT", "Sycophancy")
    assert cut.endswith("INCOMPLETE") and "of 40)" in cut
    res = _report(exp)
    assert res.exit_code == 0, res.output
    assert f"warning: {samples} does not match its results.json" in res.output
    assert "readable record(s) where results.json counts 480" in res.output and "1 unreadable line(s)" in res.output
    assert "does not match its results.json" in (exp / "report.md").read_text()


def test_an_edited_samples_file_is_caught_by_its_hash(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path / "exp", samples=True)
    samples = exp / "eval" / "bct" / "awareness" / "samples.jsonl"
    results = samples.with_name("results.json")
    data = json.loads(results.read_text())
    write(results, {**data, "samples_sha256": hashlib.sha256(samples.read_bytes()).hexdigest()})
    assert not load_experiment(exp).unverified
    samples.write_text(samples.read_text().replace('"pass": 0.0', '"pass": 1.0'))  # same count, other answers
    loaded = load_experiment(exp)
    assert "sha256 differs" in loaded.unverified[("bct", "awareness")]
    assert _paired_cell(exp, "OPCT − BCT", "Awareness").endswith("INCOMPLETE")


@pytest.mark.parametrize(("edit", "why"), [
    ({"value": 1.7, "ci_low": 0.008, "ci_high": 0.052}, "value 1.7 outside [0, 1]"),
    ({"value": 0.9, "ci_low": 0.1, "ci_high": 0.2}, "value 0.9 outside its own interval [0.1, 0.2]"),
    ({"value": 0.4, "ci_low": 0.3, "ci_high": 0.5, "n": 5000}, "n=5000 does not fit the 480 record(s) results.json counts"),
])
def test_an_impossible_rate_is_never_shown_as_a_result(tmp_path: Path, edit: dict, why: str) -> None:
    exp = make_experiment(tmp_path / "exp")
    path = exp / "eval" / "opct" / "sycophancy" / "results.json"
    data = json.loads(path.read_text())
    data["metrics"]["sycophancy_rate"].update(edit)
    write(path, data)
    table = build_table(load_experiment(exp))
    column = next(c for c in table.columns if c.key == "sycophancy")
    assert table.cell("opct", column) == f"invalid: {why}"
    assert f"{path}: sycophancy_rate: {why}; it is shown as invalid, not as a result" in load_experiment(exp).warnings
    if edit["value"] > 1:  # the command line says so too (one case: writing a report takes seconds)
        res = _report(exp)
        assert res.exit_code == 0 and "170.0%" not in res.output
        assert f"{path}: sycophancy_rate: {why}" in res.output.replace("\n", "")


def test_report_refuses_a_training_run_and_writes_nothing_there(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "t0"
    write(run / "manifest.json", {"kind": "train", "config": {"model": {"name_or_path": "organism"}}})
    write(run / "metrics.jsonl", [{"step": 1, "loss": 1.0}])
    before = sorted(p.name for p in run.iterdir())
    res = _report(run)
    assert res.exit_code == 2 and f"{run} is the training run {run}, not an experiment" in res.output
    assert sorted(p.name for p in run.iterdir()) == before


def test_report_never_overwrites_a_users_files(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "report.md").write_text("my notes")
    (folder / "report.html").write_text("<p>mine</p>")
    res = _report(folder)
    assert res.exit_code == 2 and "not an experiment: it holds files opct did not write (report.html, report.md)" in res.output
    assert (folder / "report.md").read_text() == "my notes" and (folder / "report.html").read_text() == "<p>mine</p>"


def test_report_refuses_an_empty_folder(tmp_path: Path) -> None:
    res = _report(tmp_path)
    assert res.exit_code == 2 and "is empty: not an experiment" in res.output
    assert list(tmp_path.iterdir()) == []


def test_report_out_writes_a_new_folder_and_refuses_a_foreign_one(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path / "exp", steps=3)
    out = tmp_path / "elsewhere"
    res = _report(exp, "--out", out)
    assert res.exit_code == 0, res.output
    assert {"report.html", "report.md", "samples.html", "figures"} <= {p.name for p in out.iterdir()}
    assert not (exp / "report.md").exists()
    assert _report(exp, "--out", out).exit_code == 0  # an earlier report's folder is rewritten
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "report.md").write_text("keep")
    res = _report(exp, "--out", tmp_path / "notes")
    assert res.exit_code == 2 and "already holds files opct did not write" in res.output
    assert (tmp_path / "notes" / "report.md").read_text() == "keep"


def test_a_runs_manifest_names_its_model(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path / "exp", steps=3)
    plan = json.loads((exp / "plan.json").read_text())
    write(exp / "plan.json", {k: v for k, v in plan.items() if k != "model"})
    write(exp / "manifest.json", {"kind": "experiment", "config": {"model": {"name_or_path": "organism", "dtype": "x"}}})
    assert load_experiment(exp).model == "organism"


def test_an_attack_listing_fewer_behaviours_than_its_n_marks_its_paired_difference(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path / "exp", samples=True)
    assert "INCOMPLETE" not in _paired_cell(exp, "OPCT − BCT", "Defense success (adaptive")
    path = exp / "attack" / "opct" / "results.json"
    data = json.loads(path.read_text())
    write(path, {**data, "behaviors": data["behaviors"][:3]})
    assert _paired_cell(exp, "OPCT − BCT", "Defense success (adaptive").endswith("INCOMPLETE")
    assert any("lists 3 behaviour(s) where its n is 100" in w for w in load_experiment(exp).warnings)


def test_a_metric_is_checked_against_the_range_it_declares() -> None:
    """Issue 73 (BAD 3): a signed paired difference (``biased_reasoning_rate``, ``accuracy_gap``) lies in [-1, 1],
    so the untouched demo's negative interval is a measurement; a share still lies in [0, 1]."""
    from opct.report.metric import metric_problem, parse_metric

    signed = {"value": 0.0, "ci_low": -0.0233, "ci_high": 0.0233, "n": 120, "method": "paired-cluster-bootstrap"}
    assert metric_problem(parse_metric(signed), None) is None
    assert metric_problem(parse_metric({**signed, "ci_low": -1.2}), None) == "interval [-1.2, 0.0233] outside [-1, 1]"
    share = {**signed, "method": "cluster-wilson"}
    assert metric_problem(parse_metric(share), None) == "interval [-0.0233, 0.0233] outside [0, 1]"
    declared = {**share, "range": [-2, 2], "ci_low": -1.5}  # a record's own range wins over its estimator's
    assert metric_problem(parse_metric(declared), None) is None
