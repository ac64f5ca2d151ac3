"""Tested versions held: ``constraints.txt`` is what ``make setup`` installs, ``make test-latest`` tests the newest
versions on purpose, and every manifest says whether it ran on the tested ones."""

from __future__ import annotations

import re
import subprocess
from importlib import metadata

from conftest import REPO

from opct.report.sections import results
from opct.runs import manifest as manifests
from opct.runs.manifest import CONSTRAINTS_FILE, build_manifest

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def _pins() -> dict[str, str]:
    lines = [line for line in CONSTRAINTS_FILE.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    bad = [line for line in lines if not PIN.match(line)]
    assert not bad, f"constraints.txt lines that are not name==version: {bad}"
    return dict(PIN.match(line).groups() for line in lines)


def test_the_constraints_file_pins_the_field_libraries_and_leaves_torch_to_the_makefile():
    pins = {name.lower().replace("_", "-"): v for name, v in _pins().items()}
    for name in ("transformers", "peft", "accelerate", "datasets", "safetensors", "huggingface-hub", "pydantic",
                 "inspect-ai", "lm-eval", "gguf"):
        assert name in pins, name
    assert "torch" not in pins and "opct" not in pins and "opct-lab" not in pins  # TORCH_SPEC, and this checkout


def test_make_setup_installs_with_the_constraints_and_test_latest_without_them():
    dry = subprocess.run(["make", "-n", "-B", "setup", "VENV=/nonexistent-venv"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    install = next(line for line in dry.splitlines() if "-e ./lab" in line)
    assert "-c constraints.txt" in install
    latest = subprocess.run(["make", "-n", "test-latest"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "rm -rf .venv-latest" in latest and "CONSTRAINTS=" in latest
    nested = subprocess.run(["make", "-n", "-B", "setup", "VENV=.venv-latest", "CONSTRAINTS="], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    assert "-c " not in next(line for line in nested.splitlines() if "-e ./lab" in line)


def test_tested_versions_counts_matching_pins_and_names_each_that_differs(tmp_path):
    numpy, pyyaml = metadata.version("numpy"), metadata.version("pyyaml")
    path = tmp_path / "constraints.txt"
    path.write_text(f"# a header\nnumpy=={numpy}\nPyYAML==0.0.1  # old\nnot-a-package-anywhere==1.0\n\n", encoding="utf-8")
    got = manifests.tested_versions(path)
    assert got["file"] == "constraints.txt" and len(got["sha256"]) == 64
    assert got["matched"] == 1
    assert got["differs"] == {"PyYAML": {"tested": "0.0.1", "installed": pyyaml}}  # an uninstalled pin is not counted
    assert results.tested_versions_text(got) == f"constraints.txt {got['sha256'][:12]}: 1 differ: PyYAML {pyyaml} (tested 0.0.1)"
    assert manifests.tested_versions(tmp_path / "none.txt") is None


def test_every_manifest_records_whether_it_ran_on_the_tested_versions():
    manifest = build_manifest("train", {})
    assert manifest["tested_versions"] == manifests.tested_versions()
    assert manifest["tested_versions"]["file"] == "constraints.txt"
