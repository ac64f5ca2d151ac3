"""Experiment configuration and plan resolution (no model needed)."""

import pytest
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import ConfigError
from opct.experiments.runner import load_experiment, resolve


def test_plan_mixed_axes_one_run_per_method_and_seed(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(
        "name: demo\noutput_dir: " + str(tmp_path) + "\nseeds: [0, 1]\n"
        "train: {train: {max_steps: 5}, optim: {lr: 1.0e-4}}\n"
        "method_settings: {opct: {opct: {sampling: {n: 2}}}, bct: {optim: {lr: 3.0e-4}}}\n"
    )
    plan = resolve(load_experiment(path))
    assert [r.key for r in plan.runs] == ["bct-s0", "bct-s1", "opct-s0", "opct-s1"]
    opct = plan.runs[2].config
    assert opct.method == "opct" and opct.seed == 0 and opct.method_config.sampling.n == 2 and opct.optim.lr == 1e-4
    assert plan.runs[0].config.optim.lr == 3e-4
    assert opct.data.train == ["organism:sycophancy:train", "organism:jailbreak:train", "organism:awareness:train"]
    assert opct.run_dir == tmp_path / "demo" / "train" / "opct-s0"
    assert list(plan.models) == ["base", "bct-s0", "bct-s1", "opct-s0", "opct-s1"]
    assert plan.evals == ["sycophancy", "sycophancy_train", "jailbreak", "jailbreak_train", "awareness", "awareness_train", "capability"]
    assert plan.stages[0] == "evaluate the base model" and plan.stages[-1] == "report"


def test_plan_per_axis_runs():
    cfg = load_experiment(None, ["mix_axes=false", "methods=[opct]", "axes=[sycophancy, awareness]"])
    plan = resolve(cfg)
    assert [r.key for r in plan.runs] == ["opct-sycophancy", "opct-awareness"]
    assert plan.runs[1].config.data.train == ["organism:awareness:train"]
    assert "base" not in plan.models


def test_experiment_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="methods.0"):
        load_experiment(None, ["methods=[sft]"])
    with pytest.raises(ConfigError, match="run bct: optim.learning_rate: unknown key"):
        resolve(load_experiment(None, ["train.optim.learning_rate=1"]))
    with pytest.raises(ConfigError, match="unknown method"):
        load_experiment(None, ["method_settings.dpo.optim.lr=1"])


def test_demo_dry_run_prints_the_plan():
    res = CliRunner().invoke(app, ["demo", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "stages:" in res.output and "train opct" in res.output and "report" in res.output


def test_demo_evaluates_greedily_within_48_tokens_96_sequences_per_call():
    from importlib.resources import files

    cfg = load_experiment(str(files("opct") / "experiments" / "organism_demo.yaml"))
    g = cfg.eval.generation
    assert (g.n, g.temperature, g.max_new_tokens, g.sequences_per_call) == (1, 0.0, 48, 96)
    a = cfg.attack
    assert a.enabled and a.budget == 24 and (a.generation.max_new_tokens, a.generation.sequences_per_call) == (48, 96)
    # the demo shows INCOMPLETE marks but exits 0, and leaves out the attacker's static baseline (time)
    assert cfg.eval.allow_unscored and not a.static_baseline
    assert load_experiment(None).eval.allow_unscored is False  # the default stays strict


def test_eval_and_attack_settings_errors_name_the_key():
    with pytest.raises(ConfigError, match="eval.batch_size: unknown key"):
        load_experiment(None, ["eval.batch_size=8"])
    with pytest.raises(ConfigError, match="eval.generation.batch_size: unknown key"):
        load_experiment(None, ["eval.generation.batch_size=8"])
    with pytest.raises(ConfigError, match="unknown real-data key"):
        load_experiment(None, ["eval.real.gqpa=/data"])
    with pytest.raises(ConfigError, match="answers each query once, greedily"):
        load_experiment(None, ["attack.generation.temperature=1.0"])
    with pytest.raises(ConfigError, match="attack.settings: unknown key"):
        load_experiment(None, ["attack.settings.max_new_tokens=48"])
    with pytest.raises(ConfigError, match="unknown axis capability"):
        load_experiment(None, ["axes=[sycophancy, capability]"])
