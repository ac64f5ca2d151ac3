"""opct's evals under Inspect AI, on the organism, offline: the same tokens, records and numbers as opct eval."""

from __future__ import annotations

import asyncio
import json
import math
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval  # in the dev extra: these run in `make test`
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import GenerationConfig
from opct.evals.suite import evaluate
from opct.inspect_eval.bridge import SCORE_KEY
from opct.inspect_eval.logs import read_results
from opct.inspect_eval.registry import eval_tasks_for

ARGS = {"split": "heldout", "source": "organism", "limit": 8, "judge": "rule", "data_dir": None, "real": None}


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No hub and no network: a connection attempt fails the test."""
    import socket

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def _opct_records(out: Path, name: str) -> dict[tuple[str, str, int], dict]:
    lines = (out / name / "samples.jsonl").read_text().splitlines()
    return {(r["item_id"], r["variant"], r["sample"]): r for r in map(json.loads, lines)}


def _run_inspect(task: str, log_dir: Path, log_format: str = "eval", **task_args: object) -> Path:
    (log,) = inspect_eval(task, model="opct/organism", task_args={**{"limit": 8}, **task_args}, log_dir=str(log_dir),
                          display="none", log_format=log_format)
    assert log.status == "success", log.error
    return Path(log.location)


def test_the_entry_point_registers_opct_tasks() -> None:
    eps = {ep.name: ep.value for ep in entry_points(group="inspect_ai")}
    assert eps.get("opct") == "opct.inspect_eval.registry"
    from inspect_ai.model import get_model
    from inspect_ai.util import registry_create

    from opct.inspect_eval.errors import InspectError

    for name in ("sycophancy", "jailbreak", "awareness", "capability", "capability_mc", "eval"):
        args = {"axis": "jailbreak", "limit": 1} if name == "eval" else {"limit": 1}
        assert registry_create("task", f"opct/{name}", **args) is not None, name  # loads the entry point on first use
    with pytest.raises(InspectError, match="task opct/math500: .*data_dir"):  # found, and asks for its data
        registry_create("task", "opct/math500")
    assert get_model("opct/organism").api.__class__.__name__ == "OpctModelAPI"


def test_sycophancy_under_inspect_matches_opct_eval(tmp_path: Path, offline: None) -> None:
    log_path = _run_inspect("opct/sycophancy", tmp_path / "logs")
    tasks = eval_tasks_for("sycophancy", None, ARGS)
    evaluate("organism", tasks, tmp_path / "opct", GenerationConfig(), show_progress=False)
    ours = _opct_records(tmp_path / "opct", "sycophancy")

    header, results = read_results(log_path)
    assert header["model"] == "opct/organism"
    inspect_records = json.loads(json.dumps(_records_in_log(log_path)))
    assert len(inspect_records) == len(ours) == len(tasks[0].units)
    for rec in inspect_records:  # the same tokens, judged the same way
        mine = ours[(rec["item_id"], rec["variant"], rec["sample"])]
        assert (rec["response"], rec["outcome"], rec["parsed"]) == (mine["response"], mine["outcome"], mine["parsed"])
    opct_results = json.loads((tmp_path / "opct" / "sycophancy" / "results.json").read_text())
    for name, est in results["sycophancy"].metrics.items():
        theirs = opct_results["metrics"][name]
        assert est.n == theirs["n"], name
        value = math.nan if theirs["value"] is None else theirs["value"]
        assert (math.isnan(est.value) and math.isnan(value)) or est.value == pytest.approx(value), name
        assert est.method == theirs["method"]
    assert results["sycophancy"].status == opct_results["status"]


def _records_in_log(path: Path) -> list[dict]:
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(path))
    return [s.scores[SCORE_KEY].metadata["opct_record"] for s in log.samples]


def test_sampled_epochs_reproduce_opct_eval_samples(tmp_path: Path, offline: None) -> None:
    log_path = _run_inspect("opct/capability_arithmetic", tmp_path / "logs", epochs=2, temperature=2.5, seed=3, limit=6)
    tasks = eval_tasks_for("capability", "capability_arithmetic", {**ARGS, "limit": 6})
    evaluate("organism", tasks, tmp_path / "opct", GenerationConfig(n=2, temperature=2.5), seed=3, show_progress=False)
    ours = _opct_records(tmp_path / "opct", "capability_arithmetic")
    theirs = {(r["item_id"], r["variant"], r["sample"]): r["response"] for r in _records_in_log(log_path)}
    assert sorted(theirs) == sorted(ours) and len(theirs) == 12
    assert all(theirs[k] == ours[k]["response"] for k in theirs)
    assert any(theirs[(i, v, 0)] != theirs[(i, v, 1)] for i, v, _ in theirs)  # the epochs are different draws


def test_a_failed_or_missing_sample_is_unscored_not_a_result(tmp_path: Path, offline: None) -> None:
    log_path = _run_inspect("opct/capability_mc", tmp_path / "logs", limit=10)
    _, full = read_results(log_path)
    assert full["capability_mc"].unscored == 0 and full["capability_mc"].status == "ok"
    # cut two samples out of the log, as an interrupted run leaves it
    cut = tmp_path / "cut.eval"
    with zipfile.ZipFile(log_path) as src, zipfile.ZipFile(cut, "w") as dst:
        dropped = [n for n in src.namelist() if n.startswith("samples/")][:2]
        for item in src.infolist():
            if item.filename not in dropped:
                dst.writestr(item, src.read(item.filename))
    _, partial = read_results(cut)
    res = partial["capability_mc"]
    assert res.n_records == 10 and res.unscored == 2 and res.outcomes["error"] == 2
    assert res.metrics["accuracy"].n == 8  # the accuracy is over the 8 scored answers, never the missing ones
    assert res.status == "incomplete"


def test_provider_counts_tokens_with_the_models_tokenizer(monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    import tiktoken

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("tiktoken encodings are downloaded: not usable offline")

    monkeypatch.setattr(tiktoken, "get_encoding", no_download)
    from inspect_ai.model import ChatMessageUser, get_model

    model = get_model("opct/organism")
    n = asyncio.run(model.count_tokens([ChatMessageUser(content="What is 2 + 3?")]))
    ids = model.api.tokenizer.encode("What is 2 + 3?", add_special_tokens=False)
    assert n >= len(ids) > 0


def test_opct_report_reads_inspect_logs(tmp_path: Path, offline: None) -> None:
    _run_inspect("opct/capability_mc", tmp_path / "logs", limit=6)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "logs")], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert "opct/capability_mc on opct/organism" in result.output
    assert "accuracy" in result.output and "limit=6" in result.output


def test_a_log_of_another_task_is_refused(tmp_path: Path, offline: None) -> None:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample

    from opct.inspect_eval.logs import InspectLogError

    (log,) = inspect_eval(Task(dataset=[Sample(input="hi", target="x")], solver=[]), model="mockllm/model",
                          log_dir=str(tmp_path), display="none")
    with pytest.raises(InspectLogError, match="not one of opct's"):
        read_results(log.location)


def test_json_logs_are_read_and_opcts_own_results_are_not_taken_for_logs(tmp_path: Path, offline: None) -> None:
    from opct.inspect_eval.logs import is_inspect_log_path

    log_path = _run_inspect("opct/capability_format", tmp_path / "logs", log_format="json", limit=4)
    assert log_path.suffix == ".json" and is_inspect_log_path(log_path)
    _, results = read_results(log_path)
    assert results["capability_format"].n_records == 4
    tasks = eval_tasks_for("capability", "capability_format", {**ARGS, "limit": 4})
    evaluate("organism", tasks, tmp_path / "opct", GenerationConfig(), show_progress=False)
    assert not is_inspect_log_path(tmp_path / "opct" / "capability_format" / "results.json")
