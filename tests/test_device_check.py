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
import device_logs  # noqa: E402
import device_sections  # noqa: E402

SAMPLE = Path(__file__).parent / "fixtures" / "device_check" / "report.json"


@pytest.fixture
def sample() -> dict:
    return json.loads(SAMPLE.read_text())


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    base = {"out": tmp_path / "out", "work": tmp_path / "work", "tokenizer": tmp_path, "budget": 450.0, "only": [], "accelerate_config": None,
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
    for name in ("lora", "full", "memory", "fsdp"):
        record = sample["sections"].get(name, {})
        if record.get("status") == "ok":
            m = record["metrics"]
            assert f"{m['median_step_s']:.3g}" in text and f"{m['step1_abs_loss_minus_kl']:.2e}" in text
    engines = sample["sections"]["decode"]
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
    slow = device_check.Section("env", "imports torch: longer than the limit", False, 1, 1)
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
        assert f"- {section.name} (expected {section.expected_s} s, up to {section.timeout_s} s" in res.stdout
    assert [s.name for s in device_check.PLAN] == ["env", "probe", "decode", "lora", "full", "memory", "fsdp"]
    total = sum(s.expected_s for s in device_check.PLAN)
    assert f"expected in all: {total} s of the 450 s budget (480 s: 8 minutes)" in res.stdout and total <= 480
    for target in device_check.TARGETS:
        assert target.says in res.stdout
    assert not (tmp_path / "site").exists() and not (tmp_path / "o").exists()


def _decode(engines: dict[str, float]) -> dict:
    agreement = {"max_abs_diff": 0.03, "mean_abs_diff": 0.006, "share_over_1e-3": 0.5}
    return {"status": "ok", "metrics": {"engines": {e: {"tokens_per_s": t, "logprob_agreement": agreement}
                                                    for e, t in engines.items()}}}


def test_each_target_is_met_not_met_or_not_measured_from_its_sections_numbers():
    kept = {"kept": True, "change_tells_stale_from_live": True}
    sections = {
        "probe": {"status": "ok", "metrics": {"variants": {"lora": kept, "full": kept}}},
        "decode": _decode({"opct-plain": 1400.0, "opct-fast": 16000.0, "hf-generate": 1500.0}),
        "lora": {"status": "ok", "metrics": {"median_step_s": 0.9}},
        "full": {"status": "ok", "metrics": {"median_step_s": 0.95}},
        "memory": {"status": "ok", "metrics": {"peak_over_estimate": 1.2, "peak_allocated_gib": 20.0}},
        "fsdp": {"status": "ok", "metrics": {"resume_bit_exact": True, "sharded": True}},
    }
    rows = {r["target"]: r for r in device_check.target_rows(sections)}
    met = [rows[t.says]["met"] for t in device_check.TARGETS]
    # 16,000 / 1,500 = 10.7x and >= 15,000 tok/s; 0.9 s <= 1.0; 0.95 s > 0.8; 1.2 is 20% over; resumed exactly
    assert met == [True, True, True, True, False, False, True]
    assert rows[device_check.TARGETS[1].says]["value"] == pytest.approx(16000 / 1500)
    sections["decode"] = _decode({"opct-hf": 1400.0, "hf-generate": 1500.0})  # no fast decoder in the checkout
    sections["memory"] = {"status": "ok", "metrics": {"peak_over_estimate": 1.05, "peak_rss_gib": 2.0}}  # no CUDA
    sections["fsdp"] = {"status": "failed", "metrics": {"resume_bit_exact": False, "sharded": True}}
    sections["lora"] = {"status": "timeout", "note": "stopped"}
    sections["probe"] = {"status": "timeout", "note": "stopped"}
    met = [r["met"] for r in device_check.target_rows(sections)]
    assert met == [None, None, None, None, False, None, False]
    text = device_check.render_summary({"date": "d", "wall_s": 1.0, "budget_s": 450.0, "sections": sections})
    assert "| 1.7B-shape full fine-tuning step <= 0.8 s | 0.95 s/step | NOT met |" in text
    assert "| 1.7B-shape LoRA OPCT step <= 1.0 s | n/a | not measured |" in text


def test_the_decode_section_asks_for_the_fast_decoder_and_says_when_this_checkout_lacks_it():
    with_fast = 'if name == "opct-plain": ... elif name == "opct-fast": ... elif name == "hf-generate":'
    assert device_sections.decode_engines(with_fast, vllm=True) == (["opct-plain", "opct-fast", "hf-generate", "vllm"], "")
    names, note = device_sections.decode_engines('if name == "opct-hf": ...', vllm=False)
    assert names == ["opct-hf", "hf-generate"] and "no opct-plain/opct-fast" in note
    gpu = argparse.Namespace(smoke=False, device="cuda", dtype="bfloat16", tokenizer=Path("tok"), work=Path("w"))
    argv = device_sections.decode_argv(gpu, ["opct-plain", "opct-fast", "hf-generate"])
    option = dict(zip(argv[::2], argv[1::2], strict=True))
    assert (option["--size"], option["--dtype"], option["--max-new-tokens"]) == ("0.6b", "bfloat16", "128")
    assert int(option["--prompts"]) * int(option["--n"]) == 128 and option["--engines"] == "opct-plain,opct-fast,hf-generate"


BROKEN_WORKER_CONFIG = "model: {name_or_path: /nonexistent/model}\nnot_a_key: 1\n"


def test_a_failing_fsdp_worker_leaves_its_own_traceback_in_torch_elastics_error_file(tmp_path):
    """The worker runs under torch elastic's ``@record``: its exception and traceback go to the file that
    ``TORCHELASTIC_ERROR_FILE`` names (the launcher sets it per rank under ``--log_dir``), where the section finds it."""
    import device_fsdp

    config = tmp_path / "run.yaml"
    config.write_text(BROKEN_WORKER_CONFIG)
    error_file = tmp_path / "elastic" / "run" / "attempt_0" / "0" / "error.json"
    error_file.parent.mkdir(parents=True)
    env = {**os.environ, "TORCHELASTIC_ERROR_FILE": str(error_file), "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "device_sections.py"), "fsdp-worker", "--config",
                          str(config), "--result", str(tmp_path / "r.json"), "--work", str(tmp_path), "--tokenizer",
                          str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and error_file.is_file()
    (found,) = device_fsdp.worker_errors(tmp_path / "elastic")
    assert found["rank"] == "0" and "not_a_key" in found["message"]
    assert "Traceback" in found["traceback"] and "fsdp_worker" in found["traceback"]


# ----------------------------------------------------------------------------------------------
# the logs: a child's whole output in the section's log, and its first error in the summary line

FSDP_FAILED = Path(__file__).parent / "fixtures" / "device_check" / "fsdp-failed.log"
WORKER_ERROR = "SafetensorError: Error while deserializing header: header too large"


def test_a_recorded_fsdp_failure_is_summed_up_by_the_workers_error_not_the_launchers_summary(tmp_path):
    """fsdp-failed.log: the fsdp section's log (smoke, on this CPU) when its worker cannot load the model: the
    worker's traceback (``[rank0]:``), torch elastic's ChildFailedError summary, then the section's own error."""
    log = FSDP_FAILED.read_text()
    assert "ChildFailedError" in log and log.count("Traceback (most recent call last):") == 3
    error = device_logs.first_error(log)
    assert error.startswith("safetensors._safetensors_rust." + WORKER_ERROR)
    assert error.endswith("(modeling_utils.py:4579 in _load_pretrained_model)")
    record = device_check.section_record("fsdp", 1, tmp_path / "none.json", log, 13.0)
    assert record["status"] == "failed" and record["note"] == f"exit 1: {error}"
    trace = record["traceback"].splitlines()
    assert trace[0] == "Traceback (most recent call last):" and trace[-1].endswith(WORKER_ERROR)
    assert not any(line.startswith("[rank0]") for line in trace)  # the launcher's prefix is dropped
    assert "ChildFailedError" not in record["traceback"]
    assert WORKER_ERROR in device_check.headline("fsdp", record)


def test_a_log_without_a_traceback_is_summed_up_by_its_last_line_with_words():
    summary = "exitcode  : 1 (pid: 812)\n  traceback : To enable traceback see: https://x\n" + "=" * 60 + "\n\n"
    assert device_logs.first_error(summary) == "traceback : To enable traceback see: https://x"
    assert device_logs.first_error("") == "no output" and device_logs.first_traceback("no error here") is None
    cut = "Traceback (most recent call last):\n  File \"a.py\", line 3, in f\n"  # killed before its last line
    assert device_logs.first_traceback(cut)[-1] == '  File "a.py", line 3, in f'


CHILD = """
import sys
print("step 1/3", flush=True)
print("a warning", file=sys.stderr, flush=True)
def load():
    raise ValueError("the weights are not there")
load()
"""


def test_run_logged_copies_the_childs_output_and_raises_with_its_first_error(tmp_path, capsys):
    with pytest.raises(device_logs.ChildFailed) as failed:
        device_logs.run_logged([sys.executable, "-c", CHILD], "the child", tmp_path)
    assert str(failed.value) == "the child exited 1: ValueError: the weights are not there (<string>:6 in load)"
    out = capsys.readouterr().out
    for line in ("step 1/3", "a warning", "Traceback (most recent call last):", "--- the child exited 1"):
        assert line in out
    assert device_logs.run_logged([sys.executable, "-c", "print('fine')"], "ok", tmp_path) == "fine\n"


SLOW_SECTION = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "import time\\nprint('opct x: step 3/10', flush=True)\\ntime.sleep(60)"])
"""


def test_a_section_stopped_for_time_keeps_its_childs_output_and_says_how_far_it_got(tmp_path, monkeypatch):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "device_sections.py").write_text(SLOW_SECTION)
    monkeypatch.setattr(device_check, "HERE", fake)
    section = device_check.Section("resume", "a child that prints a step, then hangs", True, 60, 1)
    args = _args(tmp_path)
    record = device_check.run_section(section, args, 3.0, [])
    assert record["status"] == "timeout" and record["seconds"] < 30
    assert record["note"] == "stopped after 3 s (last output: opct x: step 3/10)"
    assert "step 3/10" in (args.out / "logs" / "resume.log").read_text()


def test_the_plan_fits_the_budget_and_a_long_section_leaves_the_later_ones_their_time(tmp_path, monkeypatch):
    assert sum(s.expected_s for s in device_check.PLAN) <= device_check.DEFAULT_BUDGET_S
    assert all(s.expected_s <= s.timeout_s for s in device_check.PLAN)
    clock = [0.0]
    monkeypatch.setattr(device_check.time, "perf_counter", lambda: clock[0])
    given = {}

    def runs_to_its_limit(section, args, timeout, extra):
        given[section.name] = timeout
        clock[0] += timeout
        if section.name == "env":
            return {"status": "ok", "seconds": timeout, "metrics": {"cuda": True, "opct": True}, "missing": []}
        return {"status": "timeout", "seconds": timeout, "note": "stopped"}

    monkeypatch.setattr(device_check, "run_section", runs_to_its_limit)
    report = device_check.run_plan(_args(tmp_path, budget=device_check.DEFAULT_BUDGET_S))
    assert list(given) == [s.name for s in device_check.PLAN]  # every section ran, none was skipped
    assert all(given[s.name] >= s.expected_s for s in device_check.PLAN)
    assert report["wall_s"] <= device_check.DEFAULT_BUDGET_S
    # the 2026-11-28 run: resume took 150 s and left fsdp 29 s; now a long section is stopped in time for fsdp
    later = [s for s in device_check.PLAN if s.name == "fsdp"]
    memory = next(s for s in device_check.PLAN if s.name == "memory")
    assert device_check.section_limit(memory, later, 450 - 271) == 450 - 271 - later[0].expected_s
    assert device_check.DEFAULT_BUDGET_S <= device_check.EIGHT_MINUTES_S


def test_with_no_tokenizer_folder_the_check_unpacks_the_trees_own_qwen3_tokenizer(tmp_path, monkeypatch):
    """The GPU machine gets the working tree only (no ../shared): the check then uses the tree's xz copy of the
    Qwen3 tokenizer with the tiny config beside it, and the dry run says so without unpacking anything."""
    monkeypatch.setattr(device_check, "REPO", tmp_path / "checkout")  # no .qwen3-tokenizer, no ../shared
    monkeypatch.delenv("OPCT_TOKENIZER", raising=False)
    assert device_check.find_tokenizer(None) is None  # the dry run's answer: nothing unpacked
    folder = device_check.find_tokenizer(None, unpack_to=tmp_path / "work" / "qwen3-tokenizer")
    assert folder == (tmp_path / "work" / "qwen3-tokenizer").resolve()
    assert json.loads((folder / "tiny_config.json").read_text())["model_type"] == "qwen3"
    from tokenizers import Tokenizer

    assert Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size() == 151669
    assert device_check.find_tokenizer(None, unpack_to=folder) == folder  # unpacked once
    assert device_check.find_tokenizer(str(tmp_path / "nowhere"), unpack_to=tmp_path / "w2") is None  # a given folder is never replaced


def test_without_pydantic_the_check_runs_its_env_section_and_names_the_missing_wheel(tmp_path):
    """The GPU machine's image has no pydantic: the check's own scripts import none of opct's dependencies, and the
    env section names the module opct lacks and where its wheels go (make device-wheels fills .whl/)."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nclass _NoPydantic:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pydantic', 'pydantic_core'):\n"
        "            raise ModuleNotFoundError(f\"No module named '{name}'\", name=name)\n"
        "sys.meta_path.insert(0, _NoPydantic())\n")
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(blocker), "OUT": str(tmp_path / "o"),
           "DEVICE_CHECK_WHEELS": str(tmp_path / "no-wheels"), "DEVICE_CHECK_SITE": str(tmp_path / "site")}
    res = subprocess.run(["bash", str(REPO / "benchmarks" / "device_check.sh"), "--smoke", "--only", "env,lora"],
                         env=env, capture_output=True, text=True, timeout=240)
    report = json.loads((tmp_path / "o" / "device-check.json").read_text())
    assert report["sections"]["env"]["status"] == "ok", res.stdout + res.stderr
    assert report["sections"]["env"]["metrics"]["opct"] is False
    assert any("No module named 'pydantic'" in m and ".whl/" in m for m in report["missing"])
    assert report["sections"]["lora"] == {"status": "skipped", "seconds": 0.0, "note": "opct does not import here (see env)"}


def test_make_device_wheels_fetches_what_the_image_lacks_at_the_tested_versions():
    """benchmarks/device_wheels.txt names what opct imports that the image lacks; each is pinned by constraints.txt
    (what make device-wheels fetches), and pydantic's own needs are among them."""
    names = [n for n in (REPO / "benchmarks" / "device_wheels.txt").read_text().split("\n") if n and not n.startswith("#")]
    pins = {line.split("==")[0].lower().replace("_", "-"): line.split("==")[1]
            for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line and not line.startswith("#")}
    assert {n.lower().replace("_", "-") for n in names} == {"pydantic", "pydantic-core", "annotated-types", "typing-inspection"}
    assert all(n.lower().replace("_", "-") in pins for n in names)
    import importlib.metadata

    needs = {r.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower().replace("_", "-")
             for r in importlib.metadata.requires("pydantic") or [] if "extra ==" not in r}
    assert needs <= {n.lower().replace("_", "-") for n in names} | {"typing-extensions"}  # the image has typing-extensions


@pytest.fixture(scope="module")
def probe_model(tmp_path_factory) -> Path:
    import device_probe

    work = tmp_path_factory.mktemp("probe")
    tokenizer = device_check.find_tokenizer(None, unpack_to=work / "qwen3-tokenizer")
    return device_probe.build_probe_model(work / "model", True, tokenizer)


def _probe_args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(smoke=True, device="cpu", work=tmp_path)


def test_the_probe_keeps_the_rule_on_live_weights_and_a_decoder_on_stale_weights_breaks_it(probe_model, tmp_path,
                                                                                          monkeypatch):
    """The probe on this CPU (bf16 autocast on float32 weights, an unmerged LoRA adapter changed in place between
    two calls): the static decoder keeps the decoder rule on both calls. The negative control: a static decoder
    that samples from a copy of the weights taken before the change (what a graph over autocast's cached casts
    did) keeps it on the first call and breaks it on the second, so the probe can tell."""
    import copy

    import device_probe

    from opct.sampling import hf_sampler

    live = device_probe.probe_variant("lora", probe_model, _probe_args(tmp_path))
    assert live["kept"] and live["change_tells_stale_from_live"]
    assert [c["rule"] for c in live["calls"]] == ["kept", "kept"] and live["calls"][0]["decoder"] == "static"

    class StaleStatic(hf_sampler.HFSampler):
        def __init__(self, model, tokenizer, *a, decoder="auto", **kw):
            self.stale = copy.deepcopy(model) if decoder == "static" else None
            super().__init__(model, tokenizer, *a, decoder=decoder, **kw)

        def generate(self, prompts, params):
            if self.stale is None:
                return super().generate(prompts, params)
            live_model, self.model = self.model, self.stale
            try:
                return super().generate(prompts, params)
            finally:
                self.model = live_model

    monkeypatch.setattr(hf_sampler, "HFSampler", StaleStatic)
    stale = device_probe.probe_variant("lora", probe_model, _probe_args(tmp_path))
    assert stale["calls"][0]["rule"] == "kept" and stale["calls"][1]["rule"] != "kept" and not stale["kept"]
    assert "differ from the trainer's forward" in stale["calls"][1]["rule"]


def test_the_probe_target_reads_both_variants():
    import device_targets

    target = next(t for t in device_targets.TARGETS if t.section == "probe")
    good = {"status": "ok", "metrics": {"variants": {"lora": {"kept": True, "change_tells_stale_from_live": True},
                                                     "full": {"kept": True, "change_tells_stale_from_live": True}}}}
    assert device_targets.target_value(target, good) == ("lora yes, full yes", True)
    bad = {"status": "failed", "metrics": {"variants": {"lora": {"kept": False, "change_tells_stale_from_live": True},
                                                        "full": {"kept": True, "change_tells_stale_from_live": True}}}}
    assert device_targets.target_value(target, bad) == ("lora no, full yes", False)
    assert device_targets.target_value(target, {"status": "timeout"}) == (None, None)
    table = "\n".join(device_check.targets_table({"sections": {"probe": good}}))
    assert f"| {target.says} | lora yes, full yes | met |" in table
