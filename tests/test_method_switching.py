"""Switching a run's method on the command line (issue 31): ``--set method=bct`` / ``opct train --method``
drops the file's section for its old method with a one-line note, keeping the generation keys that apply to
the new method (issue 73; tests/test_reliability_round5_trl.py); keys of another method are errors."""

import warnings

import pytest
import yaml
from conftest import REPO
from typer.testing import CliRunner

from opct.cli.main import app
from opct.config import ConfigError, load_config
from opct.config.files import MethodSwitchWarning

OPCT_FILE = REPO / "configs" / "qwen_lora_opct.yaml"


def test_set_method_bct_on_an_opct_file_drops_the_opct_section_with_a_note():
    with pytest.warns(MethodSwitchWarning, match=r"from opct to bct: kept opct.sampling.max_new_tokens=1024 as "
                                                 r"bct.targets.max_new_tokens, .*; dropped opct.sampling.n=3 "
                                                 r"\(bct.targets.n stays 1\), .*opct.loss.kind=sampled"):
        cfg = load_config(OPCT_FILE, ["method=bct"])
    assert cfg.method == "bct" and cfg.method_config.targets.temperature == 0.0
    shipped = load_config(OPCT_FILE)
    assert (cfg.model, cfg.lora, cfg.data, cfg.optim, cfg.train) == (shipped.model, shipped.lora, shipped.data,
                                                                      shipped.optim, shipped.train)


def test_no_note_when_the_method_stays():
    with warnings.catch_warnings():
        warnings.simplefilter("error", MethodSwitchWarning)
        assert load_config(OPCT_FILE, ["method=opct"]).method == "opct"
        assert load_config(OPCT_FILE, ["optim.lr=1e-5"]).method == "opct"


def test_the_new_methods_section_may_be_set_with_the_switch():
    with pytest.warns(MethodSwitchWarning):
        cfg = load_config(OPCT_FILE, ["method=bct", "bct.targets.max_new_tokens=64"])
    assert cfg.method_config.targets.max_new_tokens == 64


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["method=bct", "opct.loss.kind=topk"], "opct.loss do not apply to bct"),
        (["method=bct", "bct.sampling.n=2"], "bct.sampling: unknown key"),
        (["method=sft"], "method 'sft' is not registered"),
    ],
)
@pytest.mark.filterwarnings("ignore::opct.config.files.MethodSwitchWarning")
def test_keys_that_do_not_apply_to_the_new_method_are_errors(overrides, named):
    with pytest.raises(ConfigError) as info:
        load_config(OPCT_FILE, overrides)
    assert named in str(info.value) and str(OPCT_FILE) in str(info.value)


def test_train_method_flag_switches_the_method():
    with pytest.warns(MethodSwitchWarning, match="dropped opct.sampling.n=3"):
        res = CliRunner().invoke(app, ["train", "--config", str(OPCT_FILE), "--method", "bct", "--print-config"],
                                 terminal_width=200)
    assert res.exit_code == 0, res.output
    printed = yaml.safe_load(res.stdout[res.stdout.index("name:"):])
    assert printed["method"] == "bct" and "opct" not in printed and printed["bct"]["targets"]["n"] == 1
