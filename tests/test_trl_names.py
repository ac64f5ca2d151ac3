"""TRL's training-argument names: refused (one spelling per setting), with an error naming opct's key and
where the key came from (file:line or the --set argument); the table and docs/from-trl.md agree."""

from __future__ import annotations

import re

import pytest
from conftest import REPO
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import ConfigError, RunConfig, load_config
from opct.config.trl_names import TRL_NAMES, keys_at, unknown_key_hint
from opct.experiments.experiment_config import load_experiment

#: The 13 names of issue 60, a value a TRL user would give, what the error must name, and the opct
#: settings that then work (so the error points at keys that exist and take such a value).
CASES = {
    "bf16": ("true", ["train.mixed_precision: bf16", "model.dtype"], ["train.mixed_precision=bf16", "model.dtype=bfloat16"]),
    "report_to": ("tensorboard", ["train.trackers"], ["train.trackers=[tensorboard]"]),
    "gradient_accumulation_steps": ("4", ["train.pairs_per_step"], ["train.pairs_per_step=32"]),
    "per_device_train_batch_size": ("8", ["train.sequences_per_microbatch", "train.pairs_per_step"],
                                    ["train.sequences_per_microbatch=8"]),
    "logging_steps": ("10", ["metrics.jsonl"], []),
    "save_steps": ("50", ["train.checkpoint_every"], ["train.checkpoint_every=50"]),
    "num_generations": ("4", ["opct.sampling.n"], ["opct.sampling.n=4"]),
    "max_completion_length": ("256", ["opct.sampling.max_new_tokens"], ["opct.sampling.max_new_tokens=256"]),
    "use_vllm": ("true", ["opct.sampling.engine: vllm"], ["opct.sampling.engine=vllm"]),
    "lr_scheduler_type": ("cosine", ["optim.schedule"], ["optim.schedule=cosine"]),
    "warmup_ratio": ("0.1", ["optim.warmup_steps"], ["optim.warmup_steps=10"]),
    "save_total_limit": ("3", ["train.keep_checkpoints"], ["train.keep_checkpoints=3"]),
    "eval_steps": ("20", ["validation.every"], ["validation.every=20"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_trl_name_in_a_file_is_refused_naming_opcts_key_and_the_line(name, tmp_path):
    value, named, _ = CASES[name]
    path = tmp_path / "run.yaml"
    path.write_text(f"name: trl-user\nseed: 1\n{name}: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3: {name}: unknown key")
    assert f"`{name}` is TRL's name" in message and all(key in message for key in named)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_trl_name_in_set_is_refused_naming_opcts_key_and_the_set_argument(name, tmp_path):
    value, named, works = CASES[name]
    path = tmp_path / "run.yaml"
    path.write_text("name: trl-user\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, [f"{name}={value}"])
    message = str(info.value)
    assert message.startswith(f"--set {name}={value}: {name}: unknown key") and str(path) not in message
    assert all(key in message for key in named)
    load_config(path, works)  # what the error names is a real setting that takes such a value


def test_a_set_key_inside_a_section_blames_the_set_argument_not_the_file():
    """The issue's case: `--set train.bf16=true` on a shipped config named the YAML file."""
    config = REPO / "configs" / "qwen_lora_opct.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(config, ["train.bf16=true"])
    first = str(info.value).splitlines()[0]
    assert first.startswith("--set train.bf16=true: train.bf16: unknown key") and "qwen_lora_opct.yaml" not in first
    assert "train.mixed_precision: bf16" in first


def test_the_command_line_error_names_the_set_argument_and_opcts_key():
    result = CliRunner().invoke(app, ["train", "-c", str(REPO / "configs" / "qwen_lora_opct.yaml"),
                                      "--set", "num_generations=4", "--print-config"])
    assert result.exit_code == 2
    assert "--set num_generations=4: num_generations: unknown key" in result.output and "opct.sampling.n" in result.output


def test_problems_from_a_file_and_from_set_each_name_their_origin(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("name: x\ntrain:\n  epochs: 1\n  bf16: true\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, ["optim.lerning_rate=1e-5"])
    lines = str(info.value).splitlines()
    assert any(line.strip().startswith(f"{path}:4: train.bf16: unknown key") for line in lines)
    assert any("--set optim.lerning_rate=1e-5: optim.lerning_rate: unknown key" in line for line in lines)


def test_a_section_set_whole_blames_the_set_argument_for_its_keys(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("name: x\ntrain:\n  epochs: 1\n")
    with pytest.raises(ConfigError, match=r"^--set train=\{epochs: 1, save_steps: 5\}: train.save_steps: unknown key"):
        load_config(path, ["train={epochs: 1, save_steps: 5}"])


def test_a_near_spelling_names_the_key_meant():
    with pytest.raises(ConfigError, match="train.max_step: unknown key; did you mean train.max_steps"):
        load_config(None, ["train.max_step=3"])
    with pytest.raises(ConfigError, match="opct.sampling.temprature: unknown key; did you mean opct.sampling.temperature"):
        load_config(None, ["opct.sampling.temprature=1"])
    with pytest.raises(ConfigError, match="`num_generations` is TRL's name: in opct it is opct.sampling.n"):
        load_config(None, ["num_generation=4"])  # a near spelling of a TRL name
    with pytest.raises(ConfigError, match="opct.loss.topk.topkk: unknown key; did you mean opct.loss.topk.topk"):
        load_config(None, ["opct.loss.kind=topk", "opct.loss.topkk=5"])


def test_an_unknown_key_like_nothing_known_keeps_the_plain_advice():
    assert unknown_key_hint(RunConfig, ("train", "zzqqx")) == ""
    with pytest.raises(ConfigError, match="train.zzqqx: unknown key; check its spelling"):
        load_config(None, ["train.zzqqx=1"])


def test_an_experiment_key_from_an_extended_file_names_that_file_and_line(tmp_path):
    (tmp_path / "base.yaml").write_text("name: base\nseeds: [0]\nnum_generations: 3\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nname: child\n")
    with pytest.raises(ConfigError) as info:
        load_experiment(tmp_path / "child.yaml")
    assert str(info.value).startswith(f"{tmp_path / 'base.yaml'}:3: num_generations: unknown key")
    (tmp_path / "base.yaml").write_text("name: base\nseeds: [0]\n")
    with pytest.raises(ConfigError, match=r"^--set report_to=wandb: report_to: unknown key; .*train.trackers"):
        load_experiment(tmp_path / "child.yaml", ["report_to=wandb"])


def _opct_keys(text: str) -> list[str]:
    """The dotted opct keys a table entry names (``train.trackers``, ``opct.sampling.n``...)."""
    return [k for k in re.findall(r"\b[a-z_]+(?:\.[a-z_]+)+\b", text) if not k.endswith((".jsonl", ".md"))]


@pytest.mark.parametrize("name", sorted(TRL_NAMES))
def test_every_key_the_table_names_is_an_opct_setting(name):
    for dotted in _opct_keys(TRL_NAMES[name]):
        *parents, leaf = dotted.split(".")
        if leaf == "*":
            continue
        assert leaf in keys_at(RunConfig, tuple(parents)), f"{name} -> {dotted} is not a setting"


def test_the_docs_page_maps_every_name_in_the_table():
    page = (REPO / "docs" / "from-trl.md").read_text(encoding="utf-8")
    missing = [name for name in TRL_NAMES if f"`{name}`" not in page]
    assert not missing, f"docs/from-trl.md does not map {missing}"
