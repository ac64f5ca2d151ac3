"""`opct run` killed during training and during evaluation resumes to the same results table."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from conftest import one_thread

from opct.report import format_results_table

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _experiment(tmp_path: Path, name: str) -> Path:
    cfg = {
        "name": name,
        "output_dir": str(tmp_path),
        "model": {"name_or_path": "organism"},
        "axes": ["sycophancy"],
        "methods": ["base", "opct"],
        "train": {
            "lora": {"r": 4, "alpha": 8},
            "optim": {"lr": 1.0e-3},
            "train": {"max_steps": 6, "pairs_per_step": 4, "sequences_per_microbatch": 8, "checkpoint_every": 2},
            "opct": {"sampling": {"n": 2, "max_new_tokens": 16, "temperature": 1.0}},
            "profile": {"pairs_per_axis": 2},
        },
        "eval": {"splits": ["heldout"], "capability": False, "limit": 12,
                 "generation": {"sequences_per_call": 4, "max_new_tokens": 16}},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(path: Path) -> None:
    subprocess.run([sys.executable, "-m", "opct.cli", "run", str(path), "--no-progress"], check=True, env=ENV, capture_output=True)


def _run_at_one_thread(path: Path) -> None:
    """``opct run`` in this process at one CPU thread, as the subprocesses of ``ENV`` run (OMP_NUM_THREADS=1):
    the same arithmetic, without starting another interpreter (the reference run is never killed)."""
    from opct.experiments.runner import load_experiment, run_experiment

    with one_thread():
        run_experiment(load_experiment(path, []), show_progress=False, log=lambda line: None)


def _kill_when(path: Path, ready) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "opct.cli", "run", str(path), "--no-progress"], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if ready():
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_run_resumes_after_kills_in_training_and_evaluation(tmp_path):
    _run_at_one_thread(_experiment(tmp_path, "ref"))
    exp = _experiment(tmp_path, "killed")
    root = tmp_path / "killed"
    _kill_when(exp, lambda: _lines(root / "train" / "opct" / "metrics.jsonl") >= 3)
    assert not (root / "train" / "opct" / "final").exists()
    samples = root / "eval" / "opct" / "sycophancy" / "samples.jsonl"
    _kill_when(exp, lambda: _lines(samples) >= 4 and not (samples.parent / "results.json").exists())
    assert not (samples.parent / "results.json").exists()
    _run(exp)
    for results in sorted((tmp_path / "ref" / "eval").glob("*/*/results.json")):
        other = root / results.relative_to(tmp_path / "ref")
        a, b = json.loads(results.read_text()), json.loads(other.read_text())
        assert a["metrics"] == b["metrics"], other
    def body(t: str) -> list[str]:  # the title line names the experiment
        return t.splitlines()[1:]

    table = format_results_table(tmp_path / "ref")
    assert body(table) == body(format_results_table(root).replace(str(root), str(tmp_path / "ref")))
    assert "OPCT" in table or "opct" in table
