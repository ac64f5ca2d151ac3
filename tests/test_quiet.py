"""Quiet by default: no library noise on stderr, opct's own warnings as one line; ``--verbose`` keeps it all."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import typer
import yaml
from conftest import REPO, run_config

from opct.cli.main import app
from opct.quiet import KNOWN_NOISE, QUIET_ENV, format_warning, quiet_output, quiet_unless_verbose

#: What transformers and peft print on every run that tells the user nothing.
NOISE = ("Loading weights", "is_gradient_checkpointing", "FutureWarning", "warnings.warn(", "%|")


def _env(**extra: str) -> dict[str, str]:
    """The environment of a user who set nothing: none of the quieting variables conftest sets."""
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV and k != "OPCT_VERBOSE"}
    return {**env, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), **extra}


def _train(tiny_model: Path, pairs_file: Path, tmp_path: Path, name: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """``opct [flags] train`` for one step at temperature 0.7, which warns OffPolicySamplingWarning."""
    cfg = run_config(tiny_model, pairs_file, tmp_path / name, **{"opct.sampling.temperature": 0.7, "train.max_steps": 1})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    argv = [sys.executable, "-m", "opct.cli", *flags, "train", "--config", str(path), "--no-progress"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=_env(), cwd=tmp_path, check=False)


def test_train_is_quiet_and_keeps_opct_warnings_and_verbose_keeps_everything(tiny_model, pairs_file, tmp_path):
    quiet = _train(tiny_model, pairs_file, tmp_path, "quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert not [s for s in NOISE if s in quiet.stderr], quiet.stderr
    lines = [line for line in quiet.stderr.splitlines() if line.strip()]
    assert any(line.startswith("warning: opct: sampling at temperature 0.7;") for line in lines), quiet.stderr
    assert "OffPolicySamplingWarning" not in quiet.stderr and ".py:" not in quiet.stderr  # one clean line

    loud = _train(tiny_model, pairs_file, tmp_path, "loud", "--verbose")
    assert loud.returncode == 0, loud.stderr
    # Python's own warning format: the quiet setup was not applied (OPCT_VERBOSE=1: see below)
    assert "OffPolicySamplingWarning: opct: sampling at temperature 0.7" in loud.stderr, loud.stderr
    # and the libraries print what they print (else the quiet check above would prove nothing)
    assert [s for s in NOISE if s in loud.stderr], loud.stderr


def test_known_noise_is_filtered_and_everything_else_shown_as_one_line():
    from opct.methods.base import OffPolicySamplingWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_output():
            for pattern, category in KNOWN_NOISE:
                warnings.warn(pattern.replace("\\", "") + " and more", category, stacklevel=1)
            warnings.warn("a real problem", UserWarning, stacklevel=1)
            warnings.warn("opct says", OffPolicySamplingWarning, stacklevel=1)
            assert warnings.formatwarning is format_warning
    assert [str(w.message) for w in caught] == ["a real problem", "opct says"]
    assert warnings.formatwarning is not format_warning
    assert format_warning(OffPolicySamplingWarning("opct\n  says"), OffPolicySamplingWarning, "/x/base.py", 3) == "warning: opct says\n"
    assert format_warning(UserWarning("lib"), UserWarning, "/site/lib/mod.py", 7) == "warning: lib (UserWarning, mod.py:7)\n"


def test_quiet_output_sets_and_restores_the_libraries(monkeypatch):
    """The libraries already imported are quieted through their API and put back after."""
    from datasets.utils import logging as ds_logging
    from huggingface_hub.utils import logging as hub_logging
    from transformers.utils import logging as tf_logging

    for key in QUIET_ENV:
        monkeypatch.delenv(key, raising=False)
    loggers = (tf_logging, ds_logging, hub_logging)
    before = [lib.get_verbosity() for lib in loggers]
    for lib in loggers:
        lib.set_verbosity(logging.WARNING)
    try:
        with quiet_output():
            assert [lib.get_verbosity() for lib in loggers] == [logging.ERROR] * 3
            assert not tf_logging.is_progress_bar_enabled()
            assert {k: os.environ[k] for k in QUIET_ENV} == QUIET_ENV
        assert [lib.get_verbosity() for lib in loggers] == [logging.WARNING] * 3
        assert not set(QUIET_ENV) & set(os.environ)
        monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")  # what the user set is kept
        with quiet_output():
            assert tf_logging.get_verbosity() == logging.WARNING and os.environ["TRANSFORMERS_VERBOSITY"] == "info"
            assert ds_logging.get_verbosity() == logging.ERROR
    finally:
        for lib, level in zip(loggers, before, strict=True):
            lib.set_verbosity(level)


@pytest.mark.parametrize(("flag", "env", "quiet"), [(False, None, True), (True, None, False), (False, "1", False), (False, "0", True)])
def test_verbose_flag_or_env_skips_the_quiet_setup(monkeypatch, flag, env, quiet):
    if env is None:
        monkeypatch.delenv("OPCT_VERBOSE", raising=False)
    else:
        monkeypatch.setenv("OPCT_VERBOSE", env)
    saved = warnings.formatwarning
    with typer.Context(typer.main.get_command(app)) as ctx:
        quiet_unless_verbose(ctx, flag)
        assert (warnings.formatwarning is format_warning) == quiet
    assert warnings.formatwarning is saved
