"""Issue 73's weak class "values that silently train nothing, or train the wrong way", and "the dry run and the
launch disagree": every number a settings file holds declares its range and is checked when the file is read
(:mod:`opct.config.ranges`); adapter module names are checked against the model when it loads, and a run
that would train 0 parameters is refused before step 1; ``opct train --dry-run`` applies the launch's own checks
(:func:`opct.training.launch_checks.check_launch`)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated

import pytest
import yaml
from conftest import REPO, run_config
from pydantic import Field
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import AnyValue, ConfigError, DeclaredRanges, RunConfig, StrictSettings, load_config
from opct.config.ranges import undeclared_ranges

# --------------------------------------------------------------------------- every shipped file still loads

#: Every settings file the tree ships, by what reads it.
RUN_FILES = [*sorted(p for p in (REPO / "configs").glob("*.yaml") if not p.stem.endswith("_experiment")),
             *sorted((REPO / "benchmarks" / "results").rglob("*.yaml"))]
EXPERIMENT_FILES = [*sorted((REPO / "configs").glob("*_experiment.yaml")),
                    *sorted((REPO / "opct" / "experiments").glob("*.yaml"))]
LAB_FILES = sorted((REPO / "lab" / "opct_lab" / "studies").glob("*.yaml"))


def test_the_lists_of_shipped_files_are_whole():
    """No YAML the tree tracks is left out of the loading tests below (the accelerate launch files and mkdocs
    are not opct settings)."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "*.yaml", "*.yml"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    covered = {p.relative_to(REPO).as_posix() for p in [*RUN_FILES, *EXPERIMENT_FILES, *LAB_FILES]}
    others = {t for t in tracked if t not in covered and not t.startswith(("configs/accelerate/", ".github/"))}
    assert others <= {"mkdocs.yml"}, others
    assert len(RUN_FILES) >= 10 and len(EXPERIMENT_FILES) >= 3 and len(LAB_FILES) >= 10


@pytest.mark.parametrize("path", RUN_FILES, ids=[p.name for p in RUN_FILES])
def test_every_shipped_run_file_loads(path: Path):
    cfg = load_config(path)
    assert cfg.name and cfg.method_config is not None


@pytest.mark.parametrize("path", EXPERIMENT_FILES, ids=[p.name for p in EXPERIMENT_FILES])
def test_every_shipped_experiment_file_loads_with_each_of_its_runs(path: Path):
    from opct.experiments.runner import load_experiment, resolve

    plan = resolve(load_experiment(path))
    assert plan.runs and all(isinstance(run.config, RunConfig) for run in plan.runs)


@pytest.mark.parametrize("path", LAB_FILES, ids=[p.name for p in LAB_FILES])
def test_every_shipped_study_and_selection_file_loads_with_each_of_its_runs(path: Path):
    from opct.experiments.runner import load_experiment, resolve
    from opct_lab.selection.run import candidate_configs, load_selection
    from opct_lab.study.config import family_experiment, is_study_file, load_study

    tree = yaml.safe_load(path.read_text())
    if isinstance(tree.get("selection"), dict):  # a selection file: its grid's candidate runs
        runs = [run for *_, run in candidate_configs(load_selection(path))]
    elif is_study_file(path):  # a study: the plan of each family
        study = load_study(path)
        runs = [run.config for family in study.families for run in resolve(family_experiment(study, family)).runs]
    else:
        runs = [run.config for run in resolve(load_experiment(path)).runs]
    assert runs and all(isinstance(run, RunConfig) for run in runs)


# --------------------------------------------------------------------------- every number declares its range


def _settings_classes() -> list[type]:
    for module in ("opct.methods.opct", "opct.methods.bct", "opct.methods.act", "opct.attack.grpo",
                   "opct.attack.attackers", "opct.evals.config", "opct.experiments.runner", "opct_lab.study.config",
                   "opct_lab.selection.run", "opct_lab.selection.family_rule"):
        importlib.import_module(module)

    def below(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *below(sub))]

    return below(DeclaredRanges)


def test_every_settings_class_declares_the_range_of_every_number():
    classes = {f"{c.__module__}.{c.__qualname__}" for c in _settings_classes()}
    for name in ("opct.config.RunConfig", "opct.config.OptimConfig", "opct.config.lora.LoraConfig",
                 "opct.config.TrainConfig", "opct.methods.opct.SampledLoss", "opct.methods.bct.BCTConfig",
                 "opct.methods.act.ACTConfig", "opct.attack.grpo.GRPOAttackConfig", "opct.attack.attackers.AttackConfig",
                 "opct.evals.config.EvalOptions", "opct.experiments.experiment_config.ExperimentConfig",
                 "opct_lab.selection.run.SelectionSettings", "opct_lab.selection.family_rule.FamilyAttackSettings"):
        assert name in classes  # every section of a run, an eval, an attack, an experiment and the lab's
    assert {c.__qualname__: undeclared_ranges(c) for c in _settings_classes() if undeclared_ranges(c)} == {}


def test_a_settings_class_with_a_number_of_no_declared_range_cannot_be_defined():
    with pytest.raises(TypeError, match=r"Toy: steps declare no range"):
        class Toy(StrictSettings):
            steps: int = 3

    class Fine(StrictSettings):  # each way of declaring one
        steps: int = Field(3, gt=0)
        seed: Annotated[int, AnyValue("a seed")] = 0
        betas: tuple[Annotated[float, Field(ge=0.0, lt=1.0)], ...] = (0.9,)

    assert Fine(seed=-5).seed == -5 and undeclared_ranges(Fine) == []
    with pytest.raises(TypeError, match=r"betas declare no range"):
        class Loose(StrictSettings):
            betas: tuple[float, float] = (0.9, 0.95)


# --------------------------------------------------------------------------- values that train nothing or the wrong way

#: (key, value, the allowed range as the error says it, why it is refused): issue 73's probes.
PROBES = [
    ("lora.alpha", 0, "greater than 0", "alpha 0 makes it 0"),
    ("lora.alpha", -4, "greater than 0", "alpha 0 makes it 0"),
    ("lora.alpha", float("nan"), "greater than 0", "alpha 0 makes it 0"),
    ("opct.loss.kl_coef", 0, "greater than 0", "0 trains nothing"),
    ("opct.loss.kl_coef", -1, "greater than 0", "trains away from the teacher"),
    ("opct.loss.kl_coef", float("nan"), "greater than 0", "0 trains nothing"),
]


def _write(tmp_path: Path, tree: dict) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


def _nested(key: str, value: object) -> dict:
    *path, last = key.split(".")
    tree: dict = {last: value}
    for part in reversed(path):
        tree = {part: tree}
    return tree


@pytest.mark.parametrize(("key", "value", "allowed", "why"), PROBES, ids=[f"{k}={v}" for k, v, *_ in PROBES])
def test_a_value_that_trains_nothing_or_the_wrong_way_is_refused_in_the_file(tmp_path, key, value, allowed, why):
    field = key.rsplit(".", 1)[1]
    path = _write(tmp_path, {"name": "r", "data": {"train": ["p.jsonl"]}, **_nested(key, value)})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(f"{field}:"))
    assert message.startswith(f"{path}:{line}: {key}: {value!r} ")  # the file and line, the key, the value
    assert f"must be {allowed}" in message and why in message  # the allowed range and why


@pytest.mark.parametrize(("key", "value", "allowed", "why"), PROBES, ids=[f"{k}={v}" for k, v, *_ in PROBES])
def test_a_value_that_trains_nothing_or_the_wrong_way_is_refused_through_set(key, value, allowed, why):
    written = ".nan" if value != value else str(value)
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"{key}={written}"])
    assert str(err.value).startswith(f"--set {key}={written}: {key}: {value!r} ") and f"must be {allowed}" in str(err.value)


def test_the_cli_refuses_them_with_exit_2_before_anything_loads(tmp_path):
    res = CliRunner().invoke(app, ["train", "--set", "lora.alpha=0", "--set", f"output_dir={tmp_path}"])
    assert res.exit_code == 2 and "lora.alpha: 0 is out of range: it must be greater than 0" in res.output, res.output
    assert not any(tmp_path.iterdir())


#: Floats of every section that a ``.nan`` or ``.inf`` reached unchecked before (they met step 1 as a loss).
NON_FINITE = ["train.whole_logits_max_mib", "opct.teacher_temperature", "opct.sampling.top_p", "lora.dropout",
              "validation.samples.temperature", "opct.loss.kl_discount", "optim.betas"]


@pytest.mark.parametrize("key", NON_FINITE)
@pytest.mark.parametrize("value", [".nan", ".inf"])
def test_no_float_of_any_section_takes_nan_or_infinity(key, value):
    written = f"[0.9, {value}]" if key == "optim.betas" else value
    with pytest.raises(ConfigError, match=r"is not finite|is out of range"):
        load_config(None, [f"{key}={written}"])


@pytest.mark.parametrize(("override", "message"), [
    ("optim.betas=[0.9, 1.0]", "optim.betas.1: 1.0 is out of range: it must be in [0, 1)"),
    ("optim.weight_decay=-0.1", "optim.weight_decay: -0.1 is out of range: it must be at least 0"),
    ("opct.loss={kind: topk, topk: 0}", "opct.loss.topk: 0 is out of range: it must be greater than 0"),
    ("train.pairs_per_step=0", "train.pairs_per_step: 0 is out of range: it must be greater than 0"),
])
def test_the_error_says_the_whole_range_under_the_key_as_written(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert message in str(err.value)


def test_an_empty_target_modules_is_refused_when_read():
    with pytest.raises(ConfigError, match=r"lora.target_modules: .*adapts no module, so the run would train 0 "
                                          r"parameters: name the modules to adapt .* or all-linear"):
        load_config(None, ["lora.target_modules=[]"])


@pytest.mark.parametrize("overrides", [
    ["opct.loss.kl_coef=0.05"], ["opct.loss.kl_coef=20"], ["lora.alpha=0.5"], ["lora.alpha=64", "lora.r=8"],
    ["optim.weight_decay=0"], ["optim.betas=[0.0, 0.999]"], ["seed=-7"], ["opct.loss.kl_discount=1.0"],
    ["method=act", "act.layers=[-1, 0]"], ["method=grpo_attack", "data.train=organism:attacker:train",
                                           "grpo_attack.kl_beta=0"],
    ["lora.target_modules=[q_proj, v_proj]"], ["opct.loss={kind: full, divergence: jsd, jsd_beta: 0.1}"],
])
def test_legitimate_values_stay_accepted(overrides):
    """A weight that may be 0 stays allowed: GRPO's kl_beta is a penalty beside the reward (0: no penalty, the
    reward still trains), and a seed or an ACT layer index may be negative."""
    assert load_config(None, overrides).method_config is not None


# --------------------------------------------------------------------------- module names, 0 trainable parameters


def _train_cfg(tiny_model, pairs_file, tmp_path, **overrides) -> RunConfig:
    return RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path / "runs", **overrides))


@pytest.mark.parametrize(("lora", "unknown", "shown"), [
    ({"modules_to_save": ["lm_haed"]}, "lora.modules_to_save: lm_haed matches no module of LlamaForCausalLM", "lm_head"),
    ({"target_modules": ["q_proj", "v_porj"]}, "lora.target_modules: v_porj matches no module of LlamaForCausalLM",
     "v_proj"),
    ({"target_modules": ["attn", "mlp_x"]}, "lora.target_modules: attn, mlp_x match no module", "act_fn, down_proj"),
])
def test_an_adapter_module_name_that_matches_no_module_is_refused_when_the_model_loads(
        tiny_model, pairs_file, tmp_path, lora, unknown, shown):
    from opct.training.loop import train

    cfg = _train_cfg(tiny_model, pairs_file, tmp_path, **{f"lora.{k}": v for k, v in lora.items()})
    with pytest.raises(ConfigError) as err:
        train(cfg, show_progress=False)
    message = str(err.value)
    assert message.startswith(unknown) and "would train nothing" in message
    assert f"its modules include {shown}" in message  # the nearest real name first
    assert not (cfg.run_dir / "metrics.jsonl").exists() and not (cfg.run_dir / "checkpoints").exists()


def test_names_peft_matches_are_accepted(tiny_model):
    """A target is a module's name or its last dotted parts; a module to save any end of its name (PEFT's rule)."""
    from opct.config import LoraConfig, ModelConfig
    from opct.models import load_model
    from opct.models.weights import check_adapter_names

    model = load_model(ModelConfig(name_or_path=str(tiny_model)))
    for lora in (LoraConfig(target_modules=["q_proj", "self_attn.v_proj"]), LoraConfig(modules_to_save=["lm_head"]),
                 LoraConfig(modules_to_save=["head"]), LoraConfig()):
        check_adapter_names(model, lora)
    with pytest.raises(ConfigError, match="lora.target_modules: proj matches no module"):
        check_adapter_names(model, LoraConfig(target_modules=["proj"]))  # a target must end at a dot


def test_a_run_with_0_trainable_parameters_is_refused_before_training(tiny_model, pairs_file, tmp_path, monkeypatch):
    import opct.training.loop as loop

    real = loop.add_lora

    def frozen_adapter(model, lora):
        adapted = real(model, lora)
        for p in adapted.parameters():
            p.requires_grad_(False)
        return adapted

    monkeypatch.setattr(loop, "add_lora", frozen_adapter)
    cfg = _train_cfg(tiny_model, pairs_file, tmp_path)
    with pytest.raises(ConfigError, match=r"the model has 0 trainable parameters, so training would change nothing: "
                                          r"check lora.target_modules .* or lora.modules_to_save"):
        loop.train(cfg, show_progress=False)
    assert not (cfg.run_dir / "metrics.jsonl").exists() and not (cfg.run_dir / "manifest.json").exists()


# --------------------------------------------------------------------------- the dry run applies the launch's checks

ORGANISM_OPCT = REPO / "configs" / "organism_opct.yaml"  # pairs_per_step 16


def _dry_run(*args: str):
    return CliRunner().invoke(app, ["train", "--config", str(ORGANISM_OPCT), "--dry-run", *args])


@pytest.mark.parametrize("gpus", [3, 100000])
def test_the_dry_run_refuses_a_step_the_launch_would_refuse(gpus):
    res = _dry_run("--gpus", str(gpus), "--gpu-memory", "80")
    assert res.exit_code == 2, res.output
    assert f"train.pairs_per_step=16 must be divisible by the number of processes ({gpus})" in res.output
    assert "fits" not in res.output and "the step:" not in res.output


def test_the_dry_run_plans_a_launch_that_divides_the_step():
    res = _dry_run("--gpus", "4", "--gpu-memory", "80")
    assert res.exit_code == 0 and "4 per process" in res.output and "fits a 80 GiB GPU" in res.output, res.output


def test_the_dry_run_refuses_what_a_method_refuses_on_the_launch():
    res = _dry_run("--gpus", "2", "--fsdp", "--set", "method=act")
    assert res.exit_code == 2 and "method act reads activations with forward hooks" in res.output, res.output
    res = _dry_run("--gpus", "2", "--fsdp", "--set", "train.merged_lora_sampling=true")
    assert res.exit_code == 2 and "train.merged_lora_sampling needs whole weights" in res.output, res.output


def test_the_launch_refuses_with_the_same_check(tiny_model, pairs_file, tmp_path, monkeypatch):
    """The loop calls the dry run's check with its own process count: 3 processes, a step of 4 pairs."""
    from accelerate import Accelerator

    from opct.training.loop import train

    monkeypatch.setattr(Accelerator, "num_processes", property(lambda self: 3))
    cfg = _train_cfg(tiny_model, pairs_file, tmp_path)
    with pytest.raises(ConfigError) as launched:
        train(cfg, show_progress=False)
    planned = CliRunner().invoke(app, ["train", "--config", str(_write(tmp_path, run_config(tiny_model, pairs_file,
                                                                                            tmp_path / "runs"))),
                                       "--dry-run", "--gpus", "3"])
    assert str(launched.value).startswith("train.pairs_per_step=4 must be divisible by the number of processes (3)")
    assert planned.exit_code == 2 and str(launched.value) in " ".join(planned.output.split()), planned.output
    assert not (cfg.run_dir / "metrics.jsonl").exists()


def test_the_dry_run_says_when_the_plan_counts_0_trained_parameters():
    res = _dry_run("--set", "lora.target_modules=[c_attn]")
    assert res.exit_code == 0, res.output
    assert "note: 0 trained parameters planned: no name of lora.target_modules (c_attn)" in res.output
