"""The CPUs a process may use: its affinity, capped by a cgroup CPU quota (v1 or v2), and torch's
default thread count cut to them when no --threads is given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from opct.cli import boundary


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_is_read_and_max_means_none(tmp_path):
    assert boundary.cgroup_cpu_limit(str(tmp_path)) is None  # no cgroup files: no quota
    _write(tmp_path / "cpu.max", "max 100000\n")
    assert boundary.cgroup_cpu_limit(str(tmp_path)) is None
    _write(tmp_path / "cpu.max", "150000 100000\n")
    assert boundary.cgroup_cpu_limit(str(tmp_path)) == pytest.approx(1.5)


def test_cgroup_v1_quota_is_read_and_minus_one_means_none(tmp_path):
    _write(tmp_path / "cpu" / "cpu.cfs_quota_us", "-1\n")
    _write(tmp_path / "cpu" / "cpu.cfs_period_us", "100000\n")
    assert boundary.cgroup_cpu_limit(str(tmp_path)) is None
    _write(tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us", "50000\n")
    _write(tmp_path / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    assert boundary.cgroup_cpu_limit(str(tmp_path)) == pytest.approx(0.5)


def test_available_cores_is_the_affinity_capped_by_the_quota_rounded_up(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert boundary.available_cores(str(tmp_path)) == 8
    _write(tmp_path / "cpu.max", "250000 100000\n")
    assert boundary.available_cores(str(tmp_path)) == 3
    _write(tmp_path / "cpu.max", "10000 100000\n")
    assert boundary.available_cores(str(tmp_path)) == 1  # a tenth of a CPU still runs one thread
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    _write(tmp_path / "cpu.max", "400000 100000\n")
    assert boundary.available_cores(str(tmp_path)) == 2


def test_without_threads_torch_is_cut_to_the_available_cores_only(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 16)
    monkeypatch.setattr(boundary, "DEFAULT_THREADS", None)
    monkeypatch.setattr(boundary, "available_cores", lambda: 4)
    boundary.apply_threads(None)
    assert calls == [4]
    monkeypatch.setattr(boundary, "available_cores", lambda: 32)
    boundary.apply_threads(None)  # more cores than threads: torch's default stays
    assert calls == [4]
    boundary.apply_threads(32)  # an explicit --threads wins over both
    assert calls == [4, 32]


def test_passive_waiting_only_when_the_machine_is_already_busy():
    quiet: dict[str, str] = {}
    assert not boundary.passive_waiting_when_busy(quiet, load=0.7, cores=2) and "OMP_WAIT_POLICY" not in quiet
    busy: dict[str, str] = {}
    assert boundary.passive_waiting_when_busy(busy, load=2.0, cores=2) and busy["OMP_WAIT_POLICY"] == "PASSIVE"
    mine = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert not boundary.passive_waiting_when_busy(mine, load=12.0, cores=2) and mine["OMP_WAIT_POLICY"] == "ACTIVE"
    off = {"OPCT_PASSIVE_WAIT": "0"}
    assert not boundary.passive_waiting_when_busy(off, load=12.0, cores=2) and "OMP_WAIT_POLICY" not in off


def test_the_command_line_package_sets_waiting_before_torch_loads():
    """OpenMP reads OMP_WAIT_POLICY when torch loads it: importing opct.cli must not import torch first."""
    import subprocess
    import sys

    code = "import sys, opct.cli, opct.cli.main; print('torch' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stderr
