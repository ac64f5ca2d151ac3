"""`opct eval` on real benchmark files from ../shared/data with a tiny model."""

import json

import pytest
from conftest import shared_data_dir
from typer.testing import CliRunner

from opct.cli.main import app

DATA = shared_data_dir()


@pytest.mark.skipif(not (DATA / "math-500").exists(), reason="../shared/data is absent")
def test_eval_real_benchmarks_end_to_end(tiny_model, tmp_path):
    out = tmp_path / "ev"
    args = ["eval", "--model", str(tiny_model), "--data", "real", "--data-dir", str(DATA), "--evals", "capability,awareness",
            "--limit", "4", "--max-new-tokens", "8", "--out", str(out),
            "--allow-unscored"]  # the tiny random model's answers are cut off at 8 tokens: truncated, INCOMPLETE
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    for name, metric in (("gpqa", "accuracy"), ("math500", "accuracy"), ("ifeval", "prompt_level_strict_acc"), ("awareness", "ausc_9")):
        data = json.loads((out / name / "results.json").read_text())
        assert data["status"] in ("ok", "incomplete") and data["n"] == 4 and metric in data["metrics"]
        assert len((out / name / "samples.jsonl").read_text().splitlines()) == 4
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "eval" and set(manifest["data_hashes"]) == {"gpqa", "math500", "ifeval", "awareness"}


def test_eval_rejects_unknown_evals(tiny_model, tmp_path):
    res = CliRunner().invoke(app, ["eval", "--model", str(tiny_model), "--evals", "honesty", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown eval(s) honesty" in res.output
