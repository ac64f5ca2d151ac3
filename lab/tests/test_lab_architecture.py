"""The lab beside the library: opct never imports opct_lab (at any depth, strings included), ``import opct`` loads
no lab module, neither package has an import or package circle, the library's wheel ships no lab file, and in the
lab only ``opct_lab/layout.py`` spells a study's, a selection's or an experiment's file names."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from test_architecture import EXPERIMENT_FILES, experiment_spellings

from opct.testing.import_graph import import_circles, import_graph, package_graph
from opct_lab.layout import STUDY_FILE

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "opct"
LAB = REPO / "lab" / "opct_lab"
MAX_LINES = 400


def lab_references(path: Path) -> list[str]:
    """Where the module at ``path`` names the lab: an ``import``/``from`` of ``opct_lab`` (at any depth) or a
    string constant naming one of its modules (``"opct_lab.study:run_study"``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value.split(":")[0]] if " " not in node.value else []
        found += [f"{path.name}:{node.lineno} {n}" for n in names if n == "opct_lab" or n.startswith("opct_lab.")]
    return found


def test_no_library_module_names_the_lab():
    bad = [line for path in sorted(LIBRARY.rglob("*.py")) for line in lab_references(path)]
    assert not bad, "\n".join(bad)


def test_the_lab_reference_checker_sees_an_import_in_a_function_and_a_string(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('def f():\n    from opct_lab.study import runner\nHOOK = "opct_lab.study.runner:run_study"\n'
                      'NOTE = "see opct_lab.study for the studies"\nimport opct_labs\n')
    assert lab_references(module) == ["m.py:2 opct_lab.study", "m.py:3 opct_lab.study.runner"]


@pytest.mark.parametrize("entry", ["opct", "opct.cli.main", "opct.experiments.runner"])
def test_importing_the_library_loads_no_lab_module(entry):
    code = f"import sys, {entry}\nprint(sorted(m for m in sys.modules if m == 'opct_lab' or m.startswith('opct_lab.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("root", [LIBRARY, LAB], ids=["opct", "opct_lab"])
def test_neither_package_has_an_import_or_package_circle(root):
    graph = import_graph(root)
    assert not import_circles(graph), import_circles(graph)
    assert not import_circles(package_graph(graph)), import_circles(package_graph(graph))


def test_no_lab_module_is_over_400_lines():
    long = [f"{p.relative_to(LAB)} ({n})" for p in LAB.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, long


def test_only_the_lab_layout_names_the_files_of_a_study_a_selection_or_an_experiment():
    owner = LAB / "layout.py"
    bad = [f"{p.relative_to(LAB)}: {line}" for p in sorted(LAB.rglob("*.py")) if p != owner
           for line in experiment_spellings(p)]
    assert not bad, "\n".join(bad)
    assert STUDY_FILE in EXPERIMENT_FILES and experiment_spellings(owner)


def shipped_files(repo: Path) -> list[Path]:
    """The files the library's wheel ships, as its ``pyproject.toml`` declares them: every ``.py`` of the packages
    ``[tool.setuptools.packages.find]`` finds (namespace packages included, as setuptools finds them for a
    pyproject: a data folder is one), and every file its ``package-data`` globs match in them."""
    from setuptools import find_namespace_packages

    setup = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    packages = find_namespace_packages(where=str(repo), include=setup["packages"]["find"]["include"])
    files: set[Path] = set()
    for package in packages:
        folder = repo / package.replace(".", "/")
        files |= set(folder.glob("*.py"))
        for pattern in setup.get("package-data", {}).get("*", []) + setup.get("package-data", {}).get(package, []):
            files |= {f for f in folder.glob(pattern) if f.is_file()}
    return sorted(files)


def lab_files(repo: Path) -> set[str]:
    """The lab's data files by name: its study files, their evidence and its level builds' folders."""
    lab = repo / "lab" / "opct_lab"
    return {p.name for p in (lab / "studies").iterdir() if p.name != "organism_selection.json"} | {
        p.name for p in (lab / "checkpoints").iterdir()}


def shipped_lab_files(repo: Path) -> list[str]:
    """The shipped files that are the lab's: under ``lab/``, a study file or evidence the lab keeps, a level build's."""
    names = lab_files(repo)
    return [str(f.relative_to(repo)) for f in shipped_files(repo)
            if f.is_relative_to(repo / "lab") or f.name in names or f.parent.name in names]


def test_the_library_wheel_ships_no_lab_file():
    shipped = shipped_files(REPO)
    assert REPO / "opct" / "experiments" / "organism_demo.yaml" in shipped  # the quick demo and its picks stay
    assert REPO / "opct" / "experiments" / "organism_selection.json" in shipped
    assert REPO / "opct" / "organism" / "checkpoints" / "llama" / "config.json" in shipped
    assert not shipped_lab_files(REPO), shipped_lab_files(REPO)


def test_the_wheel_check_sees_a_lab_file_left_in_the_library(tmp_path):
    """A study file left in opct/experiments, or a level build in opct/organism/checkpoints, is found."""
    (tmp_path / "opct" / "experiments").mkdir(parents=True)
    (tmp_path / "opct" / "__init__.py").write_text("")
    (tmp_path / "opct" / "experiments" / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    for folder in ("studies", "checkpoints"):
        (tmp_path / "lab" / "opct_lab" / folder).mkdir(parents=True)
    (tmp_path / "lab" / "opct_lab" / "studies" / "organism_mechanism.yaml").write_text("")
    (tmp_path / "lab" / "opct_lab" / "checkpoints" / "llama-w4-long").mkdir()
    assert shipped_lab_files(tmp_path) == []
    (tmp_path / "opct" / "experiments" / "organism_mechanism.yaml").write_text("")  # left behind by a move
    assert shipped_lab_files(tmp_path) == ["opct/experiments/organism_mechanism.yaml"]
