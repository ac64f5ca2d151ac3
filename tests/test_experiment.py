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
    with pytest.raises(ConfigError, match="unknown method 'sft'"):
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


def _variants_file(tmp_path, body: str):
    path = tmp_path / "ablation.yaml"
    path.write_text(
        f"name: abl\noutput_dir: {tmp_path}\nseeds: [0, 1]\n"
        "train: {train: {max_steps: 5}, optim: {lr: 1.0e-4}, opct: {sampling: {n: 3, temperature: 1.0}}}\n"
        "method_settings: {opct: {opct: {loss: {kind: topk, topk: 5}}}}\n" + body
    )
    return path


def test_variants_change_one_setting_over_the_methods_recipe(tmp_path):
    path = _variants_file(tmp_path, (
        "methods: [base, opct, opct-sampled, opct-n1]\nreference: opct\n"
        "variants:\n"
        "  opct-sampled: {method: opct, settings: {opct.loss: {kind: sampled, kl_coef: 0.5}}}\n"
        "  opct-n1: {method: opct, settings: {opct.sampling.n: 1}}\n"
    ))
    plan = resolve(load_experiment(path))
    runs = {r.key: r for r in plan.runs}
    assert list(runs) == ["opct-s0", "opct-s1", "opct-sampled-s0", "opct-sampled-s1", "opct-n1-s0", "opct-n1-s1"]
    ref, sampled, n1 = (runs[k].config for k in ("opct-s0", "opct-sampled-s0", "opct-n1-s1"))
    assert (ref.method_config.loss.kind, ref.method_config.loss.topk, ref.method_config.sampling.n) == ("topk", 5, 3)
    # a dict value replaces the whole block (topk's own key does not leak into the sampled loss)
    assert sampled.method == "opct" and sampled.method_config.loss.kind == "sampled" and sampled.method_config.loss.kl_coef == 0.5
    assert sampled.method_config.sampling.n == 3 and sampled.optim.lr == 1e-4
    assert (n1.method_config.sampling.n, n1.method_config.loss.kind, n1.seed) == (1, "topk", 1)
    assert runs["opct-n1-s1"].variant == "opct-n1" and runs["opct-s0"].variant is None
    assert n1.run_dir == tmp_path / "abl" / "train" / "opct-n1-s1"
    assert "opct-sampled-s0: opct, opct.loss={'kind': 'sampled', 'kl_coef': 0.5}" in plan.describe()


@pytest.mark.parametrize(("body", "message"), [
    ("methods: [opct, opct-x]\n", "unknown method 'opct-x'"),
    ("methods: [opct]\nvariants: {opct-x: {method: dpo}}\n", "unknown method 'dpo'"),
    ("methods: [opct]\nvariants: {bct: {method: opct}}\n", "has a method's name"),
    ("methods: [opct]\nvariants: {opct-s2: {method: opct}}\n", "seed suffix"),
    ("methods: [opct]\nvariants: {Opct X: {method: opct}}\n", "lower-case letters"),
    ("methods: [opct]\nvariants: {opct-x: {method: opct, settings: {seed: 3}}}\n", "changes the recipe, not seed"),
    ("methods: [opct]\nreference: bct\n", "reference 'bct' must be one of"),
    ("methods: [base, opct]\nreference: base\n", "reference 'base' must be one of"),
])
def test_variant_errors_say_what_to_change(tmp_path, body, message):
    with pytest.raises(ConfigError, match=message):
        load_experiment(_variants_file(tmp_path, body))


def test_a_variants_bad_setting_names_the_run(tmp_path):
    path = _variants_file(tmp_path, "methods: [opct, opct-x]\nvariants: {opct-x: {method: opct, settings: {optim.lrate: 1}}}\n")
    with pytest.raises(ConfigError, match="run opct-x-s0: optim.lrate: unknown key"):
        resolve(load_experiment(path))


def test_an_experiment_file_extends_another(tmp_path):
    base = _variants_file(tmp_path, "methods: [base, opct]\n")
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {base.name}\nname: child\nseeds: [3]\n")
    cfg = load_experiment(child, ["train.optim.lr=2.0e-4"])
    assert (cfg.name, cfg.seeds, cfg.methods, cfg.train["optim"]["lr"]) == ("child", [3], ["base", "opct"], 2e-4)
    assert cfg.method_settings["opct"]["opct"]["loss"]["topk"] == 5


def test_the_shipped_ablation_changes_one_knob_of_the_opct_recipe_it_ran_with():
    import json
    from importlib.resources import files

    root = files("opct_lab") / "studies"  # the lab's study files (lab/opct_lab/studies)
    plan = resolve(load_experiment(str(root / "organism_ablation.yaml")))
    demo = next(r.config for r in plan.runs if r.variant is None and r.config.method == "opct")  # the reference
    evidence = json.loads((root / "organism_selection_all_families.json").read_text(encoding="utf-8"))
    pick = evidence["method_settings"]["teacher_kl"]["opct"]
    assert (demo.optim.lr, demo.method_config.loss.kind, demo.train.max_steps) == \
        (pick["optim"]["lr"], pick["opct"]["loss"]["kind"], pick["train"]["max_steps"])
    assert plan.experiment.reference == "opct" and plan.experiment.seeds == [0, 1, 2]
    keys = ("optim.lr", "train.max_steps", "opct.sampling.n", "opct.sampling.temperature", "opct.loss.kind")

    def knobs(c):
        return dict(zip(keys, (c.optim.lr, c.train.max_steps, c.method_config.sampling.n,
                               c.method_config.sampling.temperature, c.method_config.loss.kind), strict=True))

    for run in plan.runs:
        changed = {k for k in keys if knobs(run.config)[k] != knobs(demo)[k]}
        assert len(changed) == (0 if run.variant is None else 1), (run.key, changed)
