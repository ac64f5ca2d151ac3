"""Packages only some commands need are optional extras: imported lazily, and a missing one is an error
that names the extra to install (``pip install 'opct[data]'``)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _hide(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``import <name>`` (and of its submodules) fail as if the package were not installed: ``None`` in
    ``sys.modules`` stops every import of it, ``import`` statements and ``importlib`` alike, without running
    any of its code (so nothing half-imported is left behind; the entries come back after the test)."""
    for name in names:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.setitem(sys.modules, loaded, None)
        monkeypatch.setitem(sys.modules, name, None)


def test_reading_a_hub_dataset_of_pairs_without_datasets_names_the_data_extra(monkeypatch, tmp_path):
    from opct.errors import MissingExtraError, describe
    from opct.pairs import read_pairs

    folder = tmp_path / "pairs_ds"  # a datasets.save_to_disk folder
    folder.mkdir()
    (folder / "dataset_info.json").write_text("{}", encoding="utf-8")
    (folder / "state.json").write_text(json.dumps({"_data_files": []}), encoding="utf-8")
    _hide(monkeypatch, "datasets")
    with pytest.raises(MissingExtraError) as info:
        read_pairs(folder)
    code, message = describe(info.value)
    assert code == 2 and "pip install 'opct[data]'" in message and "datasets" in message and str(folder) in message


def test_math_grading_without_math_verify_names_the_data_extra(monkeypatch):
    from opct.errors import MissingExtraError
    from opct.evals.parsing import math_equal

    _hide(monkeypatch, "math_verify")
    assert math_equal("1/2", "1/2")  # the same string needs no math-verify
    with pytest.raises(MissingExtraError, match=r"math-verify.*opct\[data\]"):
        math_equal("0.5", "\\frac{1}{2}")


def test_parquet_without_pyarrow_names_the_data_extra(monkeypatch, tmp_path):
    from opct.datasets.tabular import _iter_parquet
    from opct.errors import MissingExtraError

    _hide(monkeypatch, "pyarrow")
    with pytest.raises(MissingExtraError, match=r"opct\[data\]"):
        next(_iter_parquet(tmp_path / "x.parquet"))


def test_the_optional_packages_are_not_imported_by_the_command_line_or_training():
    code = ("import sys, opct.cli.main, opct.training.loop, opct.evals.runner, opct.datasets.tabular, opct.pairs;"
            "print(sorted(m for m in ('datasets', 'math_verify', 'langdetect', 'vllm', 'pyarrow', 'lm_eval', 'nltk') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_extras_have_upper_bounds_and_make_setup_installs_data():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = " ".join(project["dependencies"])
    assert "datasets" not in core and "math-verify" not in core and "langdetect" not in core
    extras = project["optional-dependencies"]
    for extra in ("data", "vllm"):
        assert extras[extra] and all("<" in spec for spec in extras[extra]), extras[extra]
    assert {s.split(">")[0] for s in extras["data"]} == {"datasets", "math-verify", "lm-eval", "immutabledict",
                                                         "langdetect", "nltk"}
    assert "data" in (REPO / "Makefile").read_text(encoding="utf-8").split('-e ".[')[1].split("]")[0].split(",")
