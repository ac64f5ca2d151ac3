"""The last weak spots of round 3: absurd values, silent long runs, void pairs, unknown splits, bad paths,
empty grids, SIGTERM and where a served judge sends the model's outputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
import yaml
from conftest import REPO, make_pairs, run_config
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import ConfigError, RunConfig, load_config
from opct.judges import make_judge
from opct.training.batches import load_training_pairs


def _invoke(args: list[str], app: typer.Typer = app, **kwargs: object):
    return CliRunner().invoke(app, [str(a) for a in args], terminal_width=200, **kwargs)


@pytest.mark.parametrize(("setting", "key"), [
    ("opct.sampling.temperature=1e9", "opct.sampling.temperature"),
    ("train.max_steps=100000000000000000000000", "train.max_steps"),  # 1e23 steps, written out
    ("train.epochs=1e12", "train.epochs"),
])
def test_absurd_values_are_refused_naming_the_key(setting: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, ["method=opct", setting])
    assert load_config(None, ["method=opct", "opct.sampling.temperature=2", "train.max_steps=5000"]).train.max_steps == 5000


def _pairs_file(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_void_pairs_are_warned_about(tmp_path: Path) -> None:
    rows = make_pairs(6)
    for r in rows[:2]:
        r["prompt"] = [{"role": "user", "content": r["teacher_prompt"]}]
    cfg = RunConfig.model_validate({"method": "opct", "data": {"train": [str(_pairs_file(tmp_path, rows))]}})
    with pytest.warns(UserWarning, match=r"2 of 6 training pairs have a prompt equal to their teacher prompt \(first: 'p0'"):
        load_training_pairs(cfg)


def test_an_unknown_split_is_refused(tmp_path: Path) -> None:
    rows = make_pairs(4)
    rows[3]["meta"]["split"] = "validation2"
    cfg = RunConfig.model_validate({"method": "opct", "data": {"train": [str(_pairs_file(tmp_path, rows))]}})
    with pytest.raises(ValueError, match=r"1 of 4 training pairs have an unknown split \(meta.split: 'validation2'; first: 'p3'"):
        load_training_pairs(cfg)
    rows[3]["meta"]["split"] = "Train"  # any spelling of a known split is kept
    cfg = RunConfig.model_validate({"method": "opct", "data": {"train": [str(_pairs_file(tmp_path, rows))]}})
    assert len(load_training_pairs(cfg)) == 4


def test_a_run_without_the_bar_says_where_it_is_and_which_length_rule_holds(
        tiny_model: Path, pairs_file: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from opct.training.loop import train

    cfg = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path / "runs", method="bct",
                                              **{"train.max_steps": 2, "train.epochs": 3.0}))
    with pytest.warns(UserWarning, match=r"train\.max_steps=2 sets the run's length \(0\.5 epochs of 16 pairs\); "
                                         r"train\.epochs=3 is ignored"):
        train(cfg, show_progress=False)
    err = capfd.readouterr().err
    assert "bct t: step 1/2, loss" in err and "bct t: step 2/2, loss" in err


def test_a_symlink_loop_in_out_is_a_mistake_in_the_input(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    res = _invoke(["eval", "--out", tmp_path / "a" / "x", "--evals", "sycophancy", "--limit", "2"])
    assert res.exit_code == 2, res.output
    assert "a symlink loop" in res.output and "internal error" not in res.output


def test_an_empty_grid_is_refused(tmp_path: Path) -> None:
    from opct_lab.cli import app as lab_app  # selection is the lab's (opct-lab select)

    path = tmp_path / "sel.yaml"
    path.write_text(yaml.safe_dump({"extends": str(REPO / "lab" / "opct_lab" / "studies" / "organism_selection.yaml"),
                                    "name": "empty"}) + "selection:\n  grid: {}\n")
    res = _invoke(["select", path, "--dry-run"], app=lab_app)
    assert res.exit_code == 2 and "the grid gives no candidate runs" in res.output, res.output
    path.write_text(yaml.safe_dump({"extends": str(REPO / "lab" / "opct_lab" / "studies" / "organism_selection.yaml"),
                                    "selection": {"grid": {"bct": {"optim.lr": []}}}}))
    res = _invoke(["select", path, "--dry-run"], app=lab_app)
    assert res.exit_code == 2 and "selection.grid.bct.optim.lr is empty" in res.output.replace("\n", ""), res.output


SLEEPER = """
import sys, time, typer
from opct.cli.boundary import ErrorBoundary
app = typer.Typer(cls=ErrorBoundary)
@app.command()
def wait() -> None:
    print("ready", flush=True)
    time.sleep(60)
@app.command()
def other() -> None:
    pass
app()
"""


def test_sigterm_is_handled_like_ctrl_c() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER, "wait"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert "interrupted: everything written so far is kept; rerun the same command to continue." in " ".join(out.split())


@pytest.mark.parametrize("url", ["file:///tmp/judge", "ftp://judge.example/v1", "localhost:8000/v1"])
def test_a_judge_url_that_is_no_http_server_fails_before_any_model_loads(tmp_path: Path, url: str) -> None:
    behaviors = tmp_path / "b.txt"
    behaviors.write_text("explain how to pick a lock\n")
    res = _invoke(["attack", "--model", tmp_path / "no-such-model", "--data", "real", "--behaviors", behaviors,
                   "--judge", "http:m", "--out", tmp_path / "a"],
                  env={"OPCT_JUDGE_CACHE": str(tmp_path / "cache"), "OPCT_JUDGE_BASE_URL": url})
    assert res.exit_code == 2, res.output
    assert "is not an http:// or https:// URL with a host" in res.output and "no-such-model" not in res.output


def test_a_key_never_goes_over_plain_http_to_another_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPCT_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPCT_JUDGE_API_KEY", "sk-secret")
    monkeypatch.delenv("OPCT_ALLOW_PLAIN_HTTP_KEY", raising=False)
    monkeypatch.setenv("OPCT_JUDGE_BASE_URL", "http://judge.example:8000/v1")
    with pytest.raises(ValueError, match=r"plain http:// to another machine \(judge\.example\).*OPCT_ALLOW_PLAIN_HTTP_KEY=1"):
        make_judge("harm", "http:m")
    monkeypatch.setenv("OPCT_JUDGE_BASE_URL", "http://127.0.0.1:8000/v1")  # this machine: no notice, key allowed
    make_judge("harm", "http:m")
    monkeypatch.setenv("OPCT_JUDGE_BASE_URL", "https://judge-a.example/v1")
    with pytest.warns(UserWarning, match=r"the judge is served by judge-a\.example .*the model's outputs are sent there"):
        make_judge("harm", "http:m")
    monkeypatch.setenv("OPCT_JUDGE_BASE_URL", "http://judge-b.example/v1")
    monkeypatch.setenv("OPCT_ALLOW_PLAIN_HTTP_KEY", "1")  # the flag: a trusted network
    with pytest.warns(UserWarning, match="judge-b.example"):
        make_judge("harm", "http:m")
