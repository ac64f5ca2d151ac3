"""`opct eval --config FILE`: one strict EvalConfig; flags and --set override it; errors name the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import ConfigError
from opct.evals.config import EvalConfig, load_eval_config


def test_defaults_match_the_eval_command() -> None:
    cfg = EvalConfig()
    assert cfg.model.name_or_path == "organism" and cfg.model.dtype == "float32" and cfg.data == "organism" and cfg.splits == ["heldout"] and cfg.judge == "rule"
    assert cfg.evals == ["sycophancy", "jailbreak", "awareness", "capability"]
    g = cfg.generation
    assert (g.n, g.temperature, g.max_new_tokens, g.sequences_per_call) == (1, 0.0, 512, 64)


def test_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text("evals: [sycophancy]\nlimit: 8\ngeneration: {max_new_tokens: 32}\nreal: {behaviors: b.csv}\n")
    cfg = load_eval_config(path, [("generation.max_new_tokens", 16), ("splits", ["heldout", "train"])])
    assert cfg.evals == ["sycophancy"] and cfg.limit == 8 and cfg.generation.max_new_tokens == 16
    assert cfg.splits == ["heldout", "train"] and cfg.real_paths() == {"behaviors": "b.csv"}


def test_data_dir_fills_the_paths_not_given(tmp_path: Path) -> None:
    (tmp_path / "math-500").mkdir()
    (tmp_path / "sageeval-test").mkdir()
    cfg = EvalConfig(data_dir=str(tmp_path), real={"sage": "mine"})
    assert cfg.real_paths() == {"math500": str(tmp_path / "math-500"), "sage": "mine"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([("generation.batch_size", 8)], "generation.batch_size: unknown key"),
        ([("modle", "x")], "modle: unknown key"),
        ([("evals", ["sycophancy", "honesty"])], "unknown eval(s) honesty"),
        ([("real.behaviours", "b.csv")], "unknown real-data key(s) ['behaviours']"),
        ([("splits", ["test"])], "splits.0"),
        ([("limit", 0)], "limit: Value error, limit must be a positive number of items, got 0"),
    ],
)
def test_errors_name_the_key(overrides: list, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_eval_config(None, overrides)
    assert message in str(info.value)


def test_cli_reads_the_config_and_applies_flags_then_set(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    out = tmp_path / "ev"
    path.write_text(f"evals: [jailbreak]\nlimit: 50\nout: {out}\ngeneration: {{max_new_tokens: 47, sequences_per_call: 8}}\n")
    res = CliRunner().invoke(app, ["eval", "--config", str(path), "--limit", "20", "--set", "limit=3"])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "jailbreak" / "results.json").read_text())
    assert data["n"] == 9  # limit 3 for each of wrapped, plain and benign requests
    assert data["generation_config"]["max_new_tokens"] == 47  # long enough that no answer is cut off (truncated)
    bad = CliRunner().invoke(app, ["eval", "--config", str(path), "--set", "generation.batch_size=8"])
    assert bad.exit_code == 2 and "generation.batch_size: unknown key" in bad.output
