"""The GPU check's CPU-side logic: reading what each section left, the skip lines, the summary
(on a recorded sample, tests/fixtures/device_check/report.json) and the dry run of the shell script."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import device_check  # noqa: E402
import device_sections  # noqa: E402

SAMPLE = Path(__file__).parent / "fixtures" / "device_check" / "report.json"


@pytest.fixture
def sample() -> dict:
    return json.loads(SAMPLE.read_text())


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    base = {"out": tmp_path / "out", "work": tmp_path / "work", "tokenizer": tmp_path, "budget": 450.0, "only": [],
            "smoke": False}
    ns = argparse.Namespace(**{**base, **kw})
    (ns.out / "logs").mkdir(parents=True, exist_ok=True)
    ns.work.mkdir(parents=True, exist_ok=True)
    return ns


def test_summary_of_the_recorded_sample_names_every_section_and_its_numbers(sample):
    text = device_check.render_summary(sample)
    table = text.split("\n## ")[0]  # the one-line-per-section table, before the detailed tables
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    for name, record in sample["sections"].items():
        assert name in rows and f"| {record['status']} |" in rows[name]
    for line in sample["missing"]:
        assert f"- {line}" in text
    for name in ("lora", "full", "resume", "fsdp"):
        record = sample["sections"].get(name, {})
        if record.get("status") == "ok":
            m = record["metrics"]
            assert f"{m['median_step_s']:.3g}" in text and f"{m['step1_abs_loss_minus_kl']:.2e}" in text
    engines = sample["sections"]["engines"]
    if engines["status"] == "ok":
        for name, r in engines["metrics"]["engines"].items():
            assert f"| {name} | {r['tokens_per_s']:.0f} | {r['logprob_agreement']['max_abs_diff']:.2e} |" in text


def test_summary_counts_statuses_and_shows_why_a_section_did_not_run(sample):
    sample["sections"]["full"] = {"status": "timeout", "seconds": 150.0, "note": "stopped after 150 s"}
    sample["sections"]["fsdp"] = {"status": "skipped", "seconds": 0.0, "note": "the time budget (450 s) is spent"}
    text = device_check.render_summary(sample)
    assert "| full | timeout | 150 | timeout: stopped after 150 s |" in text
    assert "| fsdp | skipped | 0 | skipped: the time budget (450 s) is spent |" in text
    statuses = [r["status"] for r in sample["sections"].values()]
    assert f"{statuses.count('timeout')} timeout" in text and f"{statuses.count('skipped')} skipped" in text
    assert "| full |" not in text.split("## Training")[-1]  # the training table holds only runs that finished


def test_a_section_record_is_trusted_only_after_a_clean_exit(tmp_path):
    result = tmp_path / "r.json"
    assert device_check.section_record("x", None, result, "log", 12.0)["status"] == "timeout"
    missing = device_check.section_record("x", 0, result, "a\nRuntimeError: no result\n\n", 1.0)
    assert missing["status"] == "failed" and "RuntimeError: no result" in missing["note"]
    result.write_text(json.dumps({"status": "ok", "metrics": {"a": 1}}))
    crashed = device_check.section_record("x", 1, result, "CUDA out of memory", 1.0)
    assert crashed["status"] == "failed" and "exit 1: CUDA out of memory" in crashed["note"]
    ok = device_check.section_record("x", 0, result, "", 3.0)
    assert ok["status"] == "ok" and ok["metrics"] == {"a": 1} and ok["seconds"] == 3.0
    result.write_text("{not json")
    assert "unreadable" in device_check.section_record("x", 0, result, "", 1.0)["note"]
    result.write_text(json.dumps({"status": "great"}))
    assert device_check.section_record("x", 0, result, "", 1.0)["status"] == "failed"


def test_skip_lines_name_the_missing_piece(tmp_path):
    gpu = device_check.PLAN[2]
    env_cpu = {"metrics": {"cuda": False, "opct": True}}
    env_gpu = {"metrics": {"cuda": True, "opct": True}}
    args = _args(tmp_path)
    assert "no CUDA GPU" in device_check.skip_reason(gpu, env_cpu, args, 400)
    assert device_check.skip_reason(gpu, env_cpu, _args(tmp_path, smoke=True), 400) is None
    assert device_check.skip_reason(gpu, env_gpu, args, 400) is None
    assert "opct does not import" in device_check.skip_reason(gpu, {"metrics": {"cuda": True, "opct": False}}, args, 400)
    assert "--tokenizer" in device_check.skip_reason(gpu, env_gpu, _args(tmp_path, tokenizer=None), 400)
    assert "budget" in device_check.skip_reason(gpu, env_gpu, args, 5)
    assert device_check.skip_reason(device_check.PLAN[0], {}, args, 400) is None  # env always runs


def test_a_failing_section_does_not_stop_the_others(tmp_path, monkeypatch):
    ran = []

    def fake(section, args, timeout, extra):
        ran.append((section.name, timeout, extra))
        if section.name == "env":
            return {"status": "ok", "seconds": 1.0, "metrics": {"cuda": True, "opct": True, "vllm": True}, "missing": []}
        if section.name == "lora":
            return {"status": "failed", "seconds": 1.0, "note": "exit 1: CUDA out of memory"}
        return {"status": "ok", "seconds": 1.0, "metrics": {}}

    monkeypatch.setattr(device_check, "run_section", fake)
    report = device_check.run_plan(_args(tmp_path))
    assert [n for n, _, _ in ran] == [s.name for s in device_check.PLAN]
    assert all(extra == ["--vllm"] for n, _, extra in ran if n != "env")  # env found vLLM: the sections use it
    assert all(t <= s.timeout_s for (_, t, _), s in zip(ran, device_check.PLAN, strict=True))
    assert report["sections"]["lora"]["status"] == "failed" and report["sections"]["fsdp"]["status"] == "ok"


def test_a_section_past_its_time_is_stopped(tmp_path):
    slow = device_check.Section("env", "imports torch: longer than the limit", False, 1)
    record = device_check.run_section(slow, _args(tmp_path), 0.2, [])
    assert record["status"] == "timeout" and record["seconds"] < 30


def test_env_section_names_cuda_and_vllm_when_missing(tmp_path):
    pytest.importorskip("torch")
    import torch

    result = tmp_path / "env.json"
    device_sections.main(["env", "--work", str(tmp_path), "--result", str(result), "--tokenizer", str(tmp_path)])
    found = json.loads(result.read_text())
    assert found["metrics"]["opct"] is True and found["metrics"]["cuda"] == torch.cuda.is_available()
    assert any(line.startswith("CUDA: not available") for line in found["missing"]) != torch.cuda.is_available()
    has_vllm = found["metrics"]["packages"]["vllm"] is not None
    assert any(line.startswith("vLLM:") for line in found["missing"]) != has_vllm
    assert all("\n" not in line for line in found["missing"])  # each piece in one line


def test_step_summary_times_steps_after_the_first():
    rows = [{"step": i + 1, "step_time_s": t, "prepare_time_s": t / 2, "tokens_per_s": 100 / t, "loss": 0.5 + i,
             "kl_to_teacher": 0.5 + i - (0.001 if i == 0 else 0), "ratio_abs_log_dev": 0.0, "completion_tokens": 100}
            for i, t in enumerate([9.0, 1.0, 3.0, 2.0])]
    s = device_sections.step_summary(rows)
    assert s["median_step_s"] == 2.0 and s["steps_per_s"] == 0.5 and s["steps"] == 4
    assert s["step1_abs_loss_minus_kl"] == pytest.approx(0.001) and s["finite"]
    rows[2]["loss"] = float("nan")
    assert not device_sections.step_summary(rows)["finite"]


def test_dry_run_lists_every_measurement_and_installs_nothing(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "DEVICE_CHECK_SITE": str(tmp_path / "site"), "OUT": str(tmp_path / "o")}
    res = subprocess.run(["bash", str(REPO / "benchmarks" / "device_check.sh"), "--dry-run"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    for section in device_check.PLAN:
        assert f"- {section.name} (" in res.stdout
    assert not (tmp_path / "site").exists() and not (tmp_path / "o").exists()
