"""benchmarks/interrupted_run.sh: a run stopped once (SIGTERM, or SIGKILL to its whole tree) and run again.

The run here is a stand-in for ``python -m opct.cli run``: it finishes only when a first attempt already
left its mark, as a resumed experiment skips what it finished."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

from script_loader import ROOT, load_script

SCRIPT = ROOT / "benchmarks" / "interrupted_run.sh"
stage_times = load_script("benchmarks/stage_times.py")

FAKE_RUN = """#!/usr/bin/env bash
# called as: fake -m opct.cli run EXPERIMENT --no-progress ...; state in $STATE
echo "args: $*"
if [ -f "$STATE/started" ]; then echo "[stage] train:bct-s0 done (3 s; 1 of 1)"; exit 0; fi
touch "$STATE/started"
sleep 60 & echo $! > "$STATE/child"
trap 'echo stopped by TERM; kill $(cat "$STATE/child"); exit 130' TERM
wait
"""


def _fake(tmp_path: Path) -> dict[str, str]:
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_RUN)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "state").mkdir()
    (tmp_path / "study.yaml").write_text("name: x\n")
    return {**os.environ, "PYTHON": str(fake), "STATE": str(tmp_path / "state")}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_stopped_run_is_run_again_to_its_end_and_both_parts_are_timed(tmp_path):
    env, out = _fake(tmp_path), tmp_path / "time.txt"
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "study.yaml"), str(out), "1", "--", "--jobs", "2"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    log = out.read_text()
    assert "stopped by TERM" in log and "== part 1: rc=130" in log and "== part 2: rc=0" in log
    assert "args: -m opct.cli run " in log and "--no-progress --jobs 2" in log
    assert stage_times.wall_seconds(log) is not None and stage_times.stage_seconds(log) == {"train:bct": [3]}


def test_a_crash_kills_every_process_of_the_run_before_it_runs_again(tmp_path):
    env, out = _fake(tmp_path), tmp_path / "time.txt"
    started = time.monotonic()
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "study.yaml"), str(out), "1", "crash"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and time.monotonic() - started < 30
    log = out.read_text()
    assert "== crashed at" in log and "SIGKILL to 2 processes" in log and "stopped by TERM" not in log
    assert not _alive(int((tmp_path / "state" / "child").read_text()))  # the run's child did not outlive it
    assert "== part 2: rc=0" in log


def test_bad_arguments_say_what_is_wrong(tmp_path):
    short = subprocess.run(["bash", str(SCRIPT), "x.yaml"], capture_output=True, text=True)
    assert short.returncode == 2 and "usage: bash benchmarks/interrupted_run.sh" in short.stdout
    missing = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "none.yaml"), str(tmp_path / "o.txt"), "5"],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "no such experiment file" in missing.stderr
    mode = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "none.yaml"), str(tmp_path / "o.txt"), "5", "pause"],
                          capture_output=True, text=True)
    assert mode.returncode == 2 and "term or crash" in mode.stderr
