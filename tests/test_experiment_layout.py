"""``ExperimentLayout`` is where an experiment's files are, for the modules that write them and for those
that read them (issue 39, item 4). No model is loaded: the experiment is the synthetic one."""

from __future__ import annotations

import json
from pathlib import Path

from opct.report.load import load_experiment
from opct.runs.experiment_layout import AttackFolder, EvalFolder, ExperimentLayout
from opct.runs.publish import run_eval_folders
from opct.testing.synthetic_experiment import make_experiment


def test_a_run_belongs_to_the_experiment_whose_train_folder_holds_it(tmp_path):
    exp = ExperimentLayout(tmp_path / "exp")
    assert ExperimentLayout.of_run(exp.run("opct")) == exp
    assert ExperimentLayout.of_run(tmp_path / "runs" / "opct") is None  # a run of its own
    assert ExperimentLayout.of_run(exp.eval("opct").root) is None


def test_what_the_synthetic_experiment_writes_is_what_the_report_reads(tmp_path):
    root = make_experiment(tmp_path / "exp", samples=True)
    layout = ExperimentLayout(root)
    assert layout.plan.is_file() and layout.manifest.is_file()
    assert layout.eval("base").results("capability_mc").is_file() and layout.eval("opct").samples("sycophancy").is_file()
    assert layout.attack("bct").results.is_file() and not layout.attack("base").results.exists()
    exp = load_experiment(root)
    assert exp.layout == layout
    assert exp.results["base"]["capability_mc"] == json.loads(layout.eval("base").results("capability_mc").read_text())
    assert set(exp.attack) == {"bct", "opct"} and exp.records("opct", "sycophancy")


def test_an_exported_run_finds_its_experiment_evals_through_the_layout(tmp_path):
    layout = ExperimentLayout(tmp_path / "exp")
    run = layout.run("opct")
    run.mkdir(parents=True)
    assert run_eval_folders(run) == []  # not evaluated yet
    folder = layout.eval("opct")
    folder.root.mkdir(parents=True)
    folder.manifest.write_text(json.dumps({"kind": "eval"}))
    assert run_eval_folders(run) == [folder.root.resolve()]
    assert run_eval_folders(tmp_path / "elsewhere" / "opct") == []


def test_an_eval_folder_lists_its_finished_evals_and_knows_an_eval_from_other_folders(tmp_path):
    folder = EvalFolder(tmp_path)
    for name in ("b", "a"):
        folder.results(name).parent.mkdir(parents=True)
        folder.results(name).write_text("{}")
    folder.samples("c").parent.mkdir()
    folder.samples("c").write_text("")
    (tmp_path / "figures").mkdir()
    assert folder.results_files() == [folder.results("a"), folder.results("b")]
    assert [p.name for p in sorted(tmp_path.iterdir()) if folder.holds_eval(p)] == ["a", "b", "c"]
    attack = AttackFolder(tmp_path / "attack")
    assert {attack.results.parent, attack.attempts.parent, attack.successes.parent} == {Path(tmp_path / "attack")}
