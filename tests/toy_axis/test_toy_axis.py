"""A toy axis registered from this folder alone (its package is ``tests/toy_axis/__init__.py``) gets
full support from every layer: organism pairs (and so training), ``opct eval``, an experiment (``opct
run``: base evaluation, BCT and OPCT training on its pairs, evaluation of the trained models on both
splits), the report (a table column, a section, and a verdict read against the paper's direction the
axis declares), its view under Inspect (cluster, headline, target) and its validation judge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from inspect_ai import eval as inspect_eval
from typer.testing import CliRunner

from opct.axes import AXES, pair_axes
from opct.cli.main import app
from opct.report import format_results_table
from toy_axis import AXIS, CLAIM, HEADER, ToyAxis


@pytest.fixture
def toy() -> Iterator[ToyAxis]:
    AXES.register("toy", AXIS)
    yield AXIS
    AXES.unregister("toy")


def test_registered_axis_has_organism_pairs(toy: ToyAxis) -> None:
    from opct.organism.pairs import build_pairs, organism_pair_source

    assert "toy" in pair_axes()
    held = organism_pair_source("toy:heldout")
    assert held == build_pairs("toy", "heldout") and {p["meta"]["family"] for p in held} == {"friend"}
    assert {p["meta"]["family"] for p in organism_pair_source("toy")} == {"teacher"}


def test_eval_cli_runs_the_registered_axis(toy: ToyAxis, tmp_path: Path) -> None:
    out = tmp_path / "ev"
    res = CliRunner().invoke(app, ["eval", "--evals", "toy", "--limit", "4", "--max-new-tokens", "12", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "toy" / "results.json").read_text())
    assert data["status"] in ("ok", "incomplete") and data["n"] == 4 and "accuracy" in data["metrics"] and "toy" in res.output


def test_validation_judges_answers_by_the_axis_judge(toy: ToyAxis) -> None:
    """The validation judge training asks (``validation.judge: organism``) is the toy axis's own."""
    import opct.wiring  # noqa: F401  (fills the validation judges)
    from opct.training.plugins import VALIDATION_JUDGES

    metas = [p["meta"] for p in toy.organism_pairs("train")[:4]]
    right, claimed = str(metas[0]["answer"]), str(metas[1]["answer"] + 1)  # the claim is always one more
    answers = [f"It is {right}.", f"My teacher is right: {claimed}.", "I am not sure.", "   "]
    assert VALIDATION_JUDGES.get("organism")("toy", metas, answers) == [True, False, None, None]


def test_inspect_reports_the_axis_headline_clustered_on_its_unit(toy: ToyAxis, tmp_path: Path) -> None:
    (log,) = inspect_eval("opct/eval", model="opct/organism", log_dir=str(tmp_path), display="none",
                          task_args={"axis": "toy", "limit": 2, "max_new_tokens": 12})
    assert log.status == "success", log.error
    headlines = next(m for m in log.eval.scorers[0].metrics if isinstance(m, dict))
    assert list(headlines) == ["held_sum"]
    options = {d.name.split("/")[-1]: d.options for d in headlines["held_sum"]}
    assert options["stderr"] == {"cluster": "question"}
    assert any(d.name.endswith("grouped") and d.options["group_key"] == "slice" for d in headlines["held_sum"])
    for sample in log.samples:
        meta = sample.metadata["opct_unit"]["meta"]
        assert sample.target == str(meta["answer"])
        assert sample.metadata["question"] == meta["question"] and sample.metadata["slice"] == "friend"
    values = {name: {k: m.value for k, m in score.metrics.items()} for name, score in
              ((s.name, s) for s in log.results.scores)}
    assert "held_sum" in values and 0.0 <= values["held_sum"]["mean"] <= 1.0


def test_experiment_and_report_carry_the_registered_axis(toy: ToyAxis, tmp_path: Path) -> None:
    cfg = {
        "name": "toy", "output_dir": str(tmp_path), "axes": ["toy"], "methods": ["base", "bct", "opct"],
        "train": {"lora": {"r": 4, "alpha": 8}, "train": {"max_steps": 2, "pairs_per_step": 4, "sequences_per_microbatch": 8},
                  "opct": {"sampling": {"n": 2, "max_new_tokens": 8}}, "bct": {"targets": {"max_new_tokens": 8}}},
        "eval": {"capability": False, "limit": 4, "generation": {"max_new_tokens": 12}},
    }
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = CliRunner().invoke(app, ["run", str(path), "--no-progress"])
    assert res.exit_code == 0, res.output
    root = tmp_path / "toy"
    assert json.loads((root / "train" / "opct" / "manifest.json").read_text())["config"]["data"]["train"] == ["organism:toy:train"]
    for method in ("base", "bct", "opct"):
        for name in ("toy", "toy_train"):
            assert json.loads((root / "eval" / method / name / "results.json").read_text())["status"] in ("ok", "incomplete")
    assert json.loads((root / "plan.json").read_text())["evals"] == ["toy", "toy_train"]
    header = f"{HEADER} ↑"
    assert header in format_results_table(root)  # the results table (transposed in the terminal)
    report = (root / "report.md").read_text()
    assert header in report and "### toy_train" in report
    row = next(line for line in report.splitlines() if line.startswith("| OPCT |"))
    assert "(n=4)" in row
    verdict = json.loads((root / "report.json").read_text())["verdict"]  # OPCT − BCT read against the axis's side
    (line,) = [v for v in verdict if v["key"] == "toy"]
    assert (line["key"], line["paper_side"], line["claim"]) == ("toy", "higher", CLAIM)
    assert f"**{header}**: paper OPCT higher" in report
