"""Honest display (issue 31): a planned cell without a number says why (``n = 0``, ``INCOMPLETE``,
``failed: <reason>``) in the table, report.md, report.html and the terminal; results.json is strict
JSON with one status; names in terminal tables are never cut."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from opct.evals.records import EvalResult, metric_record, results_written
from opct.evals.suite import results_table
from opct.report import write_report
from opct.report.load import load_experiment
from opct.report.table import MISSING, build_table
from opct.report.terminal import results_group
from opct.stats.estimate import Estimate
from opct.testing.synthetic_experiment import make_experiment

NAN = Estimate(math.nan, math.nan, math.nan, 0, "none")


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BCT's held-out sycophancy eval scored nothing (n = 0, incomplete); OPCT's stopped on a judge outage."""
    root = make_experiment(tmp_path_factory.mktemp("exp") / "honest")
    bct = root / "eval" / "bct" / "sycophancy" / "results.json"
    data = json.loads(bct.read_text())
    data.pop("complete")
    data["status"] = "incomplete"
    data["metrics"]["sycophancy_rate"] = metric_record(NAN, {"empty": 480})
    bct.write_text(json.dumps(data, allow_nan=False))
    opct = root / "eval" / "opct" / "sycophancy"
    (opct / "results.json").unlink()
    (opct / "samples.jsonl").write_text("")
    (opct / "state.json").write_text(json.dumps({"data_hash": "0", "failed": "judge http:judge-model unreachable"}))
    return root


def _sycophancy_cells(root: Path) -> dict[str, str]:
    table = build_table(load_experiment(root))
    column = next(c for c in table.columns if c.key == "sycophancy")
    return {m: table.cell(m, column) for m in table.methods}


def test_the_table_says_n_0_incomplete_and_failed_instead_of_a_dash(experiment):
    cells = _sycophancy_cells(experiment)
    assert cells["bct"] == "n = 0 INCOMPLETE"
    assert cells["opct"] == "failed: judge http:judge-model unreachable"
    assert cells["base"].startswith("41.0%")
    table = build_table(load_experiment(experiment))
    arithmetic = next(c for c in table.columns if c.key == "cap:capability_arithmetic")
    assert table.cell("bct", arithmetic) == MISSING  # never measured for BCT: the dash stays


def test_report_md_html_and_terminal_say_it_too(experiment):
    md_path, html_path = write_report(experiment)
    md, html = md_path.read_text(), html_path.read_text()
    for text in (md, html):
        assert "n = 0 INCOMPLETE" in text and "failed: judge http:judge-model unreachable" in text
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(results_group(experiment, 80))
    shown = " ".join(console.export_text().split())
    assert "n = 0 INCOMPLETE" in shown and "failed: judge" in shown


def test_a_metric_record_is_strict_json_with_a_reason():
    record = metric_record(NAN, {"empty": 3})
    text = json.dumps(record, allow_nan=False)
    assert json.loads(text)["value"] is None and record["reason"].startswith("n = 0")
    finite = metric_record(Estimate(0.5, 0.4, 0.6, 10), {})
    assert finite["value"] == 0.5 and "reason" not in finite


def test_results_status_is_the_one_flag_and_old_files_still_read():
    assert results_written({"status": "ok"}) and results_written({"status": "incomplete"})
    assert results_written({"complete": True, "status": "incomplete"})  # written before status was the one flag
    assert not results_written({"status": "failed"}) and not results_written({})


def test_eval_results_json_is_strict_and_has_one_status(tiny_model, tmp_path):
    from opct.axes.capability.tasks import multiple_choice_task
    from opct.config import ModelConfig
    from opct.datasets.base import EvalItem
    from opct.evals import run_task
    from opct.models import load_model, load_tokenizer
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler

    tok = load_tokenizer(str(tiny_model))
    engine = HFSampler(load_model(ModelConfig(name_or_path=str(tiny_model))), tok)
    items = [EvalItem(id=f"q{i}", prompt=[{"role": "user", "content": f"Q{i}? (A) x (B) y"}],
                      meta={"answer": "A", "letters": "AB"}) for i in range(3)]
    task = multiple_choice_task("mc", items)
    scored = task.metrics
    task.metrics = lambda records: {**scored(records), "accuracy": NAN}  # a metric nothing was scored for: nan, n = 0
    run_task(task, engine, tok, tmp_path, SamplingParams(n=1, max_new_tokens=2, seed=0), "tiny")
    text = (tmp_path / "mc" / "results.json").read_text()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"results.json holds {c}"))
    assert "complete" not in data and data["status"] == "ok"  # 2 tokens cut every answer off: wrong answers, in n
    accuracy = data["metrics"]["accuracy"]
    assert accuracy["n"] == 0 and accuracy["value"] is None and accuracy["reason"].startswith("n = 0")
    again = run_task(task, engine, tok, tmp_path, SamplingParams(n=1, max_new_tokens=2, seed=0), "tiny")
    assert again.reused and math.isnan(again.metrics["accuracy"].value)


def test_terminal_eval_table_never_cuts_a_name():
    long_name = "sycophancy_rate/heldout_family/peer_pressure_with_authority"
    metrics = {long_name: Estimate(0.4, 0.3, 0.5, 360, "cluster-wilson"), "flip_rate": NAN}
    result = EvalResult("s", metrics, 360, 5, Path("x"), outcomes={"empty": 5}, unscored_classes=("empty",))
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(results_table({"sycophancy_heldout_family_long": result}))
    text = console.export_text()
    assert "…" not in text
    cells = "".join(line.split("│")[2].strip() for line in text.splitlines() if line.count("│") > 2)
    assert long_name in cells and "n = 0" in text and "nan" not in text
