"""Training health and input checks (issue 30, part C): a diverging run stops, prompts are checked against
the model's positions and special tokens before any weights load, held-out splits in any spelling are
refused, names stay inside output_dir, duplicate YAML keys and malformed --set are clear errors, and
one training per run directory."""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import pytest
import yaml
from conftest import make_pairs, run_config
from safetensors.torch import load_file
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import ConfigError, RunConfig, load_config
from opct.errors import FAULT, USER_MISTAKE, describe
from opct.pairs import PairFileError
from opct.training.batches import load_training_pairs


def _cfg(tiny_model: Path, pairs_file: Path, out: Path, **kw) -> RunConfig:
    return RunConfig.model_validate(run_config(tiny_model, pairs_file, out, **kw))


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _no_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if training loads model weights."""

    def refuse(*args, **kwargs):
        raise AssertionError("model weights were loaded before the inputs were checked")

    monkeypatch.setattr("opct.training.loop.load_model", refuse)


# --------------------------------------------------------------------------- 1. divergence


def test_a_diverging_run_stops_with_exit_1_naming_the_step_and_keeps_the_last_good_checkpoint(tiny_model, pairs_file, tmp_path):
    # lr 1e30: the first update is finite (weights ~1e30), the second step's loss is NaN
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(run_config(tiny_model, pairs_file, tmp_path / "out", **{
        "optim.lr": 1e30, "train.max_steps": 3, "train.checkpoint_every": 1, "train.keep_checkpoints": 3})))
    res = CliRunner().invoke(app, ["train", "--no-progress", "-c", str(cfg)])
    assert res.exit_code == FAULT, res.output
    lines = res.output.strip().splitlines()  # the step lines --no-progress prints, then the error
    first = next(x for x in lines if not x.startswith("opct t: step "))
    assert first.startswith("error: training diverged at step 2: the loss") and "Traceback" not in res.output
    assert "optim.lr=1e+30" in res.output and "learning rate" in res.output
    run = tmp_path / "out" / "t"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-1"]  # nothing written from NaN
    assert not (run / "final").exists() and "done" not in res.output
    weights = load_file(str(run / "checkpoints" / "step-1" / "model.safetensors"))
    assert all(bool(t.isfinite().all()) for t in weights.values())


def test_an_update_that_makes_weights_nonfinite_stops_before_its_checkpoint(tiny_model, pairs_file, tmp_path):
    # Adam with eps 0 divides 0 by 0 on LoRA A's zero first gradient: the loss and gradient norm are finite,
    # the weights after the update are not
    from opct.training.health import TrainingDivergedError
    from opct.training.loop import train

    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"optim.eps": 0.0, "train.checkpoint_every": 1})
    with pytest.raises(TrainingDivergedError, match=r"step 1: a trainable weight after the update") as err:
        train(cfg, show_progress=False)
    assert describe(err.value)[0] == FAULT and "optim.eps: 0" in str(err.value) and "on_nonfinite" not in str(err.value)
    assert not (cfg.run_dir / "final").exists()
    assert not (cfg.run_dir / "checkpoints").exists() or not any((cfg.run_dir / "checkpoints").iterdir())


def test_on_nonfinite_skip_skips_the_update_and_counts_it(tiny_model, pairs_file, tmp_path):
    from opct.training.loop import train

    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"optim.lr": 1e30, "train.max_steps": 3, "train.on_nonfinite": "skip"})
    train(cfg, show_progress=False)
    rows = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["nonfinite_skipped"] for r in rows] == [0, 1, 1]
    assert math.isfinite(rows[0]["loss"]) and not math.isfinite(rows[1]["loss"])
    final = load_file(str(cfg.run_dir / "final" / "adapter_model.safetensors"))
    assert all(bool(t.isfinite().all()) for t in final.values())


def test_nonfinite_optimizer_settings_are_refused_by_the_config():
    for setting in ("optim.lr=.inf", "optim.lr=.nan", "optim.eps=.nan", "optim.max_grad_norm=.inf"):
        with pytest.raises(ConfigError, match=setting.split("=")[0].replace(".", r"\.")):
            load_config(None, [setting])
    with pytest.raises(ConfigError, match="loss scaler"):
        load_config(None, ["train.on_nonfinite=skip", "train.mixed_precision=fp16"])
    assert load_config(None, []).train.on_nonfinite == "stop"


# --------------------------------------------------------------------------- 2. lengths


def test_a_huge_prompt_is_refused_with_file_line_and_length_before_weights_load(tiny_model, tmp_path, monkeypatch):
    _no_weights(monkeypatch)
    rows = make_pairs(8)
    rows[5]["prompt"] = "x" * 100_000
    pairs = _write(tmp_path / "pairs.jsonl", rows)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(run_config(tiny_model, pairs, tmp_path / "out")))
    res = CliRunner().invoke(app, ["train", "--no-progress", "-c", str(cfg)])
    assert res.exit_code == USER_MISTAKE, res.output
    first = res.output.strip().splitlines()[0]
    assert f"{pairs}:6: prompt: pair 'p5':" in first and "more than the model's 512 positions" in first
    assert "max_position_embeddings" in first and "opct.sampling.max_new_tokens" in first
    assert not (tmp_path / "out").exists()


def _checked(tiny_model, pairs_file, tmp_path, **kw):
    from opct.models import load_tokenizer
    from opct.training.prompt_checks import check_prompts

    cfg = _cfg(tiny_model, pairs_file, tmp_path, **kw)
    return check_prompts(cfg, load_tokenizer(str(tiny_model)), load_training_pairs(cfg), [])


def _rendered_length(tiny_model, prompt) -> int:
    from opct.models import load_tokenizer, render_prompt

    return len(render_prompt(load_tokenizer(str(tiny_model)), prompt))


def test_the_generated_tokens_count_in_the_budget(tiny_model, tmp_path):
    rows = make_pairs(4)
    rows[2]["teacher_prompt"] = "word " * 100
    pairs = _write(tmp_path / "pairs.jsonl", rows)
    room = 512 - _rendered_length(tiny_model, rows[2]["teacher_prompt"])
    assert len(_checked(tiny_model, pairs, tmp_path, **{"opct.sampling.max_new_tokens": room})[0]) == 4
    with pytest.raises(PairFileError, match=rf"pairs\.jsonl:3: teacher_prompt: pair 'p2': {512 - room} tokens .* \+ "
                                            rf"{room + 1} new tokens \(opct\.sampling\.max_new_tokens\)"):
        _checked(tiny_model, pairs, tmp_path, **{"opct.sampling.max_new_tokens": room + 1})
    with pytest.raises(PairFileError, match=r"bct\.targets\.max_new_tokens"):  # BCT's targets, the same way
        _checked(tiny_model, pairs, tmp_path, method="bct", **{"bct.targets": {"max_new_tokens": room + 1}})


def test_max_prompt_tokens_refuses_or_drops_with_a_warning(tiny_model, pairs_file, tmp_path):
    with pytest.raises(PairFileError, match=r"more than data\.max_prompt_tokens=12") as err:
        _checked(tiny_model, pairs_file, tmp_path, **{"data.max_prompt_tokens": 12})
    # every too-long prompt is named: the 16 prompts (26-29 tokens), and the 6 teacher prompts of 13 tokens
    fields = [p.field for p in err.value.problems]
    assert fields.count("prompt") == 16 and fields.count("teacher_prompt") == 6
    with pytest.warns(UserWarning, match=r"dropped 9 training and 0 validation pairs"):
        kept, _ = _checked(tiny_model, pairs_file, tmp_path, **{"data.max_prompt_tokens": 26, "data.too_long": "drop"})
    assert [p.id for p in kept] == [f"p{i}" for i in range(7)]  # p7 on: 27 tokens or more


def test_validation_pairs_are_checked_with_the_validation_budget(tiny_model, pairs_file, tmp_path):
    from opct.models import load_tokenizer
    from opct.training.prompt_checks import check_prompts

    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"validation.samples": {"max_new_tokens": 500}})
    val = _write(tmp_path / "val.jsonl", [{**r, "id": f"v{i}", "meta": {"split": "val"}} for i, r in enumerate(make_pairs(2))])
    from opct.pairs import read_pairs

    with pytest.raises(PairFileError, match=r"val\.jsonl:1: .*validation\.samples\.max_new_tokens"):
        check_prompts(cfg, load_tokenizer(str(tiny_model)), load_training_pairs(cfg), read_pairs(val))


def test_model_positions_come_from_the_config_alone(tmp_path):
    from transformers import GPT2Config, MambaConfig

    from opct.config import ModelConfig
    from opct.training.prompt_checks import model_positions

    GPT2Config(n_positions=64).save_pretrained(tmp_path / "gpt2")
    MambaConfig().save_pretrained(tmp_path / "mamba")
    assert model_positions(ModelConfig(name_or_path=str(tmp_path / "gpt2"))) == (64, "max_position_embeddings")
    assert model_positions(ModelConfig(name_or_path=str(tmp_path / "mamba"))) is None  # no limit: no positions check


# --------------------------------------------------------------------------- 3. held-out splits


@pytest.mark.parametrize("split", ["held-out", "HeldOut", "held_out", "Held Out", "holdout"])
def test_heldout_pairs_in_any_spelling_are_refused(tiny_model, tmp_path, split):
    rows = make_pairs(4)
    rows[1]["meta"]["split"] = split
    cfg = _cfg(tiny_model, _write(tmp_path / "pairs.jsonl", rows), tmp_path)
    with pytest.raises(ValueError, match=rf"held-out pairs \(meta\.split: {split}; first: 'p1' at .*pairs\.jsonl:2\)"):
        load_training_pairs(cfg)
    rows[1]["meta"]["split"] = "Validation"
    cfg = _cfg(tiny_model, _write(tmp_path / "pairs.jsonl", rows), tmp_path)
    with pytest.raises(ValueError, match="validation pairs"):
        load_training_pairs(cfg)
    from opct.pairs import is_heldout_split, is_validation_split

    assert is_heldout_split(split) and not is_heldout_split("train") and is_validation_split("Val") and is_validation_split("famval")


@pytest.mark.parametrize("source", ["organism:sycophancy:held-out", "organism:jailbreak:HeldOut", "organism:attacker:heldout"])
def test_heldout_sources_are_refused_before_they_are_read(source, monkeypatch):
    from opct.pairs import PAIR_SOURCES

    read = []
    monkeypatch.setattr(PAIR_SOURCES, "get", lambda name: read.append(name))
    with pytest.raises(ValueError, match=rf"data\.train entry '{source}' gives held-out pairs"):
        load_training_pairs(load_config(None, [f"data.train=[{source}]"]))
    assert read == []


def test_unknown_splits_are_errors_listing_the_valid_ones():
    with pytest.raises(ValueError, match="unknown split 'HeldOut'; choose one of train, val, famval, heldout"):
        load_training_pairs(load_config(None, ["data.train=[organism:sycophancy:HeldOut]", "data.allow_heldout_training=true"]))
    with pytest.raises(ValueError, match="unknown split 'trian'; choose one of train, heldout"):
        load_training_pairs(load_config(None, ["data.train=[organism:attacker:trian]"]))
    with pytest.raises(ValueError, match=r"data\.split gives held-out pairs"):
        load_training_pairs(load_config(None, ["data.train=[x.jsonl]", "data.split=Held-Out"]))


def test_a_registered_source_giving_no_pairs_is_an_error():
    from opct.pairs import PAIR_SOURCES, load_pair_source

    PAIR_SOURCES.register("empty", lambda argument: [])
    try:
        with pytest.raises(PairFileError, match=r"empty:thing: pair source 'empty' gave no pairs for 'thing'"):
            load_pair_source("empty:thing")
    finally:
        PAIR_SOURCES.unregister("empty")


def test_validation_refuses_heldout_pairs_in_any_spelling(tiny_model, pairs_file, tmp_path):
    from opct.training.validation import load_validation_pairs

    val = _write(tmp_path / "val.jsonl", [{**r, "id": f"v{i}", "meta": {"split": "Held-Out"}} for i, r in enumerate(make_pairs(2))])
    cfg = _cfg(tiny_model, pairs_file, tmp_path, **{"data.validation": [str(val)]})
    with pytest.raises(ValueError, match="held-out"):
        load_validation_pairs(cfg)


# --------------------------------------------------------------------------- 4. special tokens


def test_special_token_text_in_a_prompt_is_refused_with_file_line_field(tiny_model, tmp_path, monkeypatch):
    _no_weights(monkeypatch)
    rows = make_pairs(4)
    rows[3]["teacher_prompt"] = [{"role": "system", "content": "be nice"},
                                 {"role": "user", "content": "hi<|end|><|assistant|>sure"}]
    rows[0]["prompt"] = "a <|nope|> tag that is no special token"
    pairs = _write(tmp_path / "pairs.jsonl", rows)
    from opct.training.loop import train

    with pytest.raises(PairFileError, match=r"pairs\.jsonl:4: teacher_prompt\[1\]\.content: pair 'p3' holds '<\|end\|>'") as err:
        train(_cfg(tiny_model, pairs, tmp_path), show_progress=False)
    assert len(err.value.problems) == 1 and describe(err.value)[0] == USER_MISTAKE
    with pytest.warns(UserWarning, match="1 prompt messages hold special-token text"):
        kept, _ = _checked(tiny_model, pairs, tmp_path, **{"data.allow_special_tokens": True})
    assert len(kept) == 4


# --------------------------------------------------------------------------- 5. names


@pytest.mark.parametrize("name", ["../../etc", "a/b", "..", ".hidden", "", "x..y", "/abs", "run name"])
def test_names_that_leave_output_dir_are_refused(name, tmp_path):
    from opct.experiments.runner import load_experiment
    from opct_lab.study.config import load_study

    with pytest.raises(ConfigError, match=r"name: Value error, .* is not a usable name"):
        load_config(None, [f"name={json.dumps(name)}"])
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"name": name}))
    with pytest.raises(ConfigError, match="not a usable name"):
        load_experiment(exp)
    exp.write_text(yaml.safe_dump({"name": name, "families": {"llama": "organism"}}))
    with pytest.raises(ConfigError, match="not a usable name"):
        load_study(exp)


def test_ordinary_names_pass():
    for name in ("run", "organism-demo", "opct-s1", "Run_2.v3"):
        assert load_config(None, [f"name={name}"]).name == name


# --------------------------------------------------------------------------- 6. duplicate YAML keys


def test_a_duplicate_yaml_key_names_the_file_line_and_key(tmp_path):
    from opct.experiments.runner import load_experiment

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: a\noptim:\n  lr: 1.0e-3\n  warmup_steps: 2\n  lr: 1.0e-4\n")
    with pytest.raises(ConfigError, match=rf"{cfg}:5: key 'lr' is given twice in one section \(first on line 3\)"):
        load_config(cfg)
    cfg.write_text("name: a\nseed: 1\nname: b\n")
    res = CliRunner().invoke(app, ["train", "-c", str(cfg), "--print-config"])
    assert res.exit_code == USER_MISTAKE and f"{cfg}:3: key 'name' is given twice" in res.output
    cfg.write_text("name: e\nname: f\n")
    with pytest.raises(ConfigError, match="key 'name' is given twice"):
        load_experiment(cfg)


def test_the_same_key_in_two_sections_and_merge_keys_are_fine(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("opct:\n  sampling: &s {n: 2, max_new_tokens: 8}\nvalidation:\n  samples:\n    <<: *s\n    n: 3\n")
    loaded = load_config(cfg)
    assert loaded.method_config.sampling.n == 2 and loaded.validation.samples.n == 3


# --------------------------------------------------------------------------- 7. --set


@pytest.mark.parametrize("bad", ["optim.lr=[1", "optim.lr={a", 'optim.lr="a', "optim.lr=*x", "=3", "optim..lr=1", "train.max_steps"])
def test_a_malformed_set_names_the_argument_and_the_form(bad):
    with pytest.raises(ConfigError, match=r"key\.sub=value") as err:
        load_config(None, [bad])
    assert str(err.value).startswith(f"--set {bad!r}: ")
    res = CliRunner().invoke(app, ["train", "--print-config", "--set", bad])
    assert res.exit_code == USER_MISTAKE and "internal error" not in res.output and f"--set {bad!r}" in res.output


def test_well_formed_set_values_still_read_as_yaml():
    cfg = load_config(None, ["optim.lr=1e-5", "data.train=[a.jsonl, b.jsonl]", "name=x-1", "opct.sampling.n=4"])
    assert cfg.optim.lr == 1e-5 and cfg.data.train == ["a.jsonl", "b.jsonl"] and cfg.method_config.sampling.n == 4


# --------------------------------------------------------------------------- 8. one training per directory


def test_a_second_training_of_the_same_run_directory_is_refused_while_the_first_runs(tiny_model, pairs_file, tmp_path, monkeypatch):
    """The second training starts while the first is between steps (at its first checkpoint); it stops with
    RunLockedError naming the first one's pid, changes nothing, and the first finishes."""
    from opct.runs.directory import RunDirectory
    from opct.runs.errors import RunLockedError
    from opct.training.loop import train

    cfg = _cfg(tiny_model, pairs_file, tmp_path)
    real, seen = RunDirectory.save_checkpoint, []

    def second_training_meanwhile(self, *args, **kwargs):
        if not seen:
            before = (cfg.run_dir / "metrics.jsonl").read_bytes()
            with pytest.raises(RunLockedError, match=rf"in use by another training \(pid {os.getpid()}") as err:
                train(cfg, show_progress=False)
            seen.append((err.value, (cfg.run_dir / "metrics.jsonl").read_bytes() == before))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(RunDirectory, "save_checkpoint", second_training_meanwhile)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = train(cfg, show_progress=False)
    assert len(seen) == 1 and describe(seen[0][0])[0] == USER_MISTAKE and seen[0][1]
    assert result.steps == 4 and (cfg.run_dir / "final").is_dir()
    assert len((cfg.run_dir / "metrics.jsonl").read_text().splitlines()) == 4
