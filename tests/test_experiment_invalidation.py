"""``opct run`` redoes exactly the stages whose inputs changed, and those ``--force`` names (issue 31).
No training or evaluation runs here: both are fakes that record what they were asked to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opct.config import ConfigError, dump_config
from opct.runs.layout import RunLayout
from opct.runs.manifest import hash_records


@pytest.fixture
def stages(monkeypatch):
    """Fake training (a manifest, one checkpoint, final/), evaluation and report; returns the calls."""
    import opct.evals.suite
    import opct.report
    import opct.training.loop
    from opct.training.batches import load_training_pairs

    calls: list[str] = []

    def fake_train(cfg, show_progress=True):
        calls.append(f"train {cfg.name} lr={cfg.optim.lr:g}")
        layout = RunLayout(cfg.run_dir)
        pairs = load_training_pairs(cfg)
        layout.root.mkdir(parents=True, exist_ok=True)
        layout.manifest.write_text(json.dumps({"config": dump_config(cfg), "num_pairs": len(pairs),
                                               "data_hash": hash_records([p.to_dict() for p in pairs])}))
        (layout.checkpoints / f"step-{cfg.train.max_steps}").mkdir(parents=True)
        layout.final.mkdir()

    def fake_evaluate(model, tasks, out, *args, **kwargs):
        calls.append(f"eval {Path(out).name} had={sorted(p.name for p in Path(out).iterdir()) if Path(out).exists() else []}")
        (Path(out) / "sycophancy").mkdir(parents=True, exist_ok=True)
        return {}

    monkeypatch.setattr(opct.training.loop, "train", fake_train)
    monkeypatch.setattr(opct.evals.suite, "evaluate", fake_evaluate)
    monkeypatch.setattr(opct.report, "write_report", lambda root: None)
    return calls


def _experiment(tmp_path: Path, *overrides: str):
    from opct.experiments.runner import load_experiment

    return load_experiment(None, [f"output_dir={tmp_path}", "name=e", "axes=[sycophancy]", "methods=[base, bct]",
                                  "eval.limit=1", "attack.enabled=false", "train.train.max_steps=2", *overrides])


def _run(cfg, force=()):
    from opct.experiments.runner import run_experiment

    lines: list[str] = []
    run_experiment(cfg, show_progress=False, log=lines.append, force=list(force))
    return lines


def test_an_unchanged_rerun_trains_nothing(tmp_path, stages):
    _run(_experiment(tmp_path))
    stages.clear()
    lines = _run(_experiment(tmp_path))
    assert not [c for c in stages if c.startswith("train")]
    assert "[stage] train bct: complete, skipped" in lines


def test_a_changed_training_config_retrains_from_scratch_and_keeps_the_old_run(tmp_path, stages):
    _run(_experiment(tmp_path))
    stages.clear()
    lines = _run(_experiment(tmp_path, "train.optim.lr=1e-4"))
    assert "train bct lr=0.0001" in stages
    note = next(line for line in lines if "trained again from scratch" in line)
    assert "optim.lr" in note and "replaced" in note
    kept = tmp_path / "e" / "replaced" / "bct-1"
    assert json.loads(RunLayout(kept).manifest.read_text())["config"]["optim"]["lr"] == 5e-6
    assert not (tmp_path / "e" / "train" / "replaced").exists()  # never seen as a method by the report


def test_force_names_one_stage(tmp_path, stages):
    _run(_experiment(tmp_path))
    stages.clear()
    lines = _run(_experiment(tmp_path), force=["eval:bct", "train:bct"])
    assert [c for c in stages if c.startswith("train")] == ["train bct lr=5e-06"]
    assert "eval base had=['sycophancy']" in stages  # base: reused as it is (its evaluate keeps what matches)
    assert "eval bct had=[]" in stages  # forced: its results deleted first
    assert any("train bct: trained again from scratch, forced (--force)" in line for line in lines)


@pytest.mark.parametrize(("force", "named"), [
    ("fit", "unknown stage 'fit'"),
    ("train:opct", "no train stage for 'opct'; its train stages are for: bct"),
    ("train:base", "no train stage for 'base'"),
    ("attack", "this experiment has no attack stage"),
])
def test_a_bad_force_is_an_error_naming_it(tmp_path, stages, force, named):
    with pytest.raises(ConfigError, match=named.replace("(", r"\(")):
        _run(_experiment(tmp_path), force=[force])
    assert not stages


def test_opct_run_has_force_and_checks_it_before_any_stage(tmp_path, stages):
    from opct.cli.main import app

    path = tmp_path / "e.yaml"
    path.write_text(f"name: e\noutput_dir: {tmp_path}\naxes: [sycophancy]\nmethods: [base, bct]\nattack: {{enabled: false}}\n")
    res = CliRunner().invoke(app, ["run", str(path), "--force", "train:opct", "--no-progress"], terminal_width=200)
    assert res.exit_code == 2 and "no train stage for 'opct'" in res.output and not stages
    res = CliRunner().invoke(app, ["run", str(path), "--force", "eval:bct", "--dry-run"], terminal_width=200)
    assert res.exit_code == 0, res.output
