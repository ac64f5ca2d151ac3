r"""The GPU check: what opct does on a lent GPU, measured in one go, in a few minutes, with no network.

Usage (``benchmarks/device_check.sh`` installs nothing from the network and calls this)::

    benchmarks/device_check.sh --dry-run             # what it would measure
    benchmarks/device_check.sh                       # writes $OUT (or ./device-check/)
    benchmarks/device_check.sh --smoke --only env,lora   # the tiny model on the CPU: checks the script

Each section of :data:`PLAN` runs in its own process (``benchmarks/device_sections.py``), so a crash, an
out-of-memory or a hang in one is that section's result, not the end of the check. A section gets at
most its own time limit and what is left of ``--budget``. A missing piece (CUDA, vLLM, opct's own
imports, the tokenizer) is named in one line, and the sections that need it are skipped with that
line; the others run. Each of issue 57's GPU targets is judged from the sections' numbers
(``benchmarks/device_targets.py``). The result: ``device-check.json`` (every number, and ``targets``),
``device-check.md`` (the summary :func:`render_summary` writes, with a targets table) and
``logs/<section>.log``. ``--dry-run`` lists the sections with their expected and longest times.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import device_logs  # beside this file
from device_targets import TARGETS, target_rows, targets_table

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LOG_TAIL_CHARS = 600
#: Seconds for all sections together, by default: the check must fit in 8 minutes of a lent GPU.
DEFAULT_BUDGET_S = 450.0
#: The GPU time the check must fit in (issue 57: 8 minutes on one H200 or H100).
EIGHT_MINUTES_S = 480


@dataclass(frozen=True)
class Section:
    """One measurement: its name, what it measures, what it needs, its time limit and the time it is
    expected to take on one H100 (seconds; measured 2026-11-28, or estimated where it had not finished)."""

    name: str
    measures: str
    needs_gpu: bool
    timeout_s: int
    expected_s: int


#: Expected seconds on one H100 or H200: env 21 s and the 1.7B-shape LoRA and full runs (83 s and 87 s for 6
#: steps) were measured on an H100 on 2026-11-28 (benchmarks/results/device-check-h100-20261128-run1); decode,
#: memory and fsdp are estimates (the fast decoder, the 4B shape and the three-launch resume had not run on a GPU),
#: and so is the probe, run first (issue 70: it tells whether the decoder samples from the live weights).
#: The expected times add up to at most the default budget (450 s, inside 8 minutes with the GPU's start), and
#: each section leaves the sections after it their expected time (:func:`section_limit`).
PLAN = (
    Section("env", "Python, torch, CUDA and the GPU, package versions; whether vLLM and opct import", False, 60, 20),
    Section("probe", "the static decoder (CUDA graphs) under bf16 autocast on float32 weights, an unmerged LoRA "
            "adapter and full fine-tuning, the weights changed in place between two calls: both calls keep the "
            "decoder rule against the trainer's forward of the live weights", True, 90, 20),
    Section("decode", "rollouts on a random Qwen3-0.6B-shaped model, bf16, 128 rows (32 prompts x n=4) x 128 "
            "tokens: tokens/s of opct's plain and fast decoders, HF generate and vLLM (if installed), and "
            "|recorded log-prob - the trainer's forward| per token", True, 150, 90),
    Section("lora", "opct training, LoRA r=32, bf16, random Qwen3-1.7B-shaped model, HF rollouts (8 pairs x n=3 x "
            "64 tokens): seconds per step, peak GPU memory, step 1's |loss - KL| (on-policy check)", True, 120, 75),
    Section("full", "the same with full fine-tuning: seconds per step, peak GPU memory, step 1's |loss - KL|",
            True, 120, 70),
    Section("memory", "a Qwen3-4B-shaped LoRA run with gradient checkpointing and 1,024-token completions (2 pairs x "
            "n=2, 2 steps): its peak GPU memory beside the dry run's estimate", True, 170, 95),
    Section("fsdp", "FSDP2 through `accelerate launch` with configs/accelerate/fsdp2.yaml, one process (NCCL): full "
            "fine-tuning of the 0.6B shape to step 2, resumed to step 4 in a new process, compared with a run "
            "straight to step 4 (bit-exact final/ and losses); every worker's own traceback kept", True, 150, 75),
)


# ----------------------------------------------------------------------------------------------
# running the sections


#: The Qwen3 tokenizer shipped in the tree (xz), and the 2-layer config the smoke run and the tiny shape use.
SHIPPED_TOKENIZER = REPO / "opct" / "testing" / "tokenizers" / "qwen3"
SHIPPED_TINY_CONFIG = REPO / "opct" / "testing" / "tiny_configs" / "qwen3.json"


def unpack_shipped_tokenizer(dest: Path) -> Path:
    """The tree's own Qwen3 tokenizer as a folder the sections read (``tokenizer.json`` unpacked from its xz,
    the other tokenizer files, and ``tiny_config.json`` from ``opct/testing/tiny_configs/qwen3.json``), written
    once into ``dest``. Imports no opct module (the machine may lack opct's dependencies)."""
    import lzma

    if not (dest / "tokenizer.json").is_file():
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for extra in SHIPPED_TOKENIZER.iterdir():
            if extra.name != "tokenizer.json.xz":
                shutil.copy2(extra, tmp / extra.name)
        shutil.copy2(SHIPPED_TINY_CONFIG, tmp / "tiny_config.json")
        (tmp / "tokenizer.json").write_bytes(lzma.decompress((SHIPPED_TOKENIZER / "tokenizer.json.xz").read_bytes()))
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest.resolve()


def find_tokenizer(given: str | None, unpack_to: Path | None = None) -> Path | None:
    """The Qwen3 tokenizer folder: ``--tokenizer``, ``$OPCT_TOKENIZER``, ``./.qwen3-tokenizer`` or
    ``../shared/models/qwen3-tokenizer``, the first that holds ``tokenizer.json`` and ``tiny_config.json``;
    else the tree's own copy, unpacked into ``unpack_to`` (None: not unpacked, the dry run's answer)."""
    candidates = [given, os.environ.get("OPCT_TOKENIZER"), str(REPO / ".qwen3-tokenizer"),
                  str(REPO.parent / "shared" / "models" / "qwen3-tokenizer")]
    for c in candidates:
        if c and (Path(c) / "tokenizer.json").is_file() and (Path(c) / "tiny_config.json").is_file():
            return Path(c).resolve()
    if given is None and (SHIPPED_TOKENIZER / "tokenizer.json.xz").is_file() and unpack_to is not None:
        return unpack_shipped_tokenizer(unpack_to)
    return None


def section_record(name: str, returncode: int | None, result_file: Path, log: str, seconds: float) -> dict[str, Any]:
    """One section's record from what its process left: its JSON result, or why there is none.

    ``returncode`` None means it ran out of time (the note then quotes the log's last line: how far it
    got). A result file whose status is ``ok`` after a non-zero exit is not trusted: the section failed,
    and its note is the first traceback's exception (``device_logs.first_error``), the real error rather
    than a launcher's summary; the whole first traceback is kept under ``traceback``.
    """
    tail = log.strip()[-LOG_TAIL_CHARS:]
    if returncode is None:
        return {"status": "timeout", "seconds": seconds, "note": f"stopped after {seconds:.0f} s (last output: "
                f"{device_logs.last_line(log)[:160]})", "log_tail": tail}
    if returncode != 0 or not result_file.is_file():
        record = {"status": "failed", "seconds": seconds,
                  "note": f"exit {returncode}: {device_logs.first_error(log)[:300]}", "log_tail": tail}
        if (traceback := device_logs.traceback_text(log)) is not None:
            record["traceback"] = traceback
        return record
    try:
        found = json.loads(result_file.read_text())
    except json.JSONDecodeError as err:
        return {"status": "failed", "seconds": seconds, "note": f"unreadable result: {err}", "log_tail": tail}
    if found.get("status") not in ("ok", "failed", "skipped"):
        return {"status": "failed", "seconds": seconds, "note": f"unknown status {found.get('status')!r}",
                "log_tail": tail}
    return {"seconds": seconds, "note": "", "metrics": {}, "missing": [], **found}


def run_section(section: Section, args: argparse.Namespace, timeout: float, extra: list[str]) -> dict[str, Any]:
    """Run one section in its own process for at most ``timeout`` seconds; its log goes to ``logs/``."""
    result_file = args.work / f"{section.name}.json"
    result_file.unlink(missing_ok=True)
    cmd = [sys.executable, str(HERE / "device_sections.py"), section.name, "--work", str(args.work),
           "--result", str(result_file), "--tokenizer", str(args.tokenizer or ""), *extra]
    log_path = args.out / "logs" / f"{section.name}.log"
    start = time.perf_counter()
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})  # every line in the log before a kill
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the section's whole process group (accelerate's workers included)
            proc.wait()
            code = None
    return section_record(section.name, code, result_file, log_path.read_text(errors="replace"),
                          time.perf_counter() - start)


def skip_reason(section: Section, env: dict[str, Any], args: argparse.Namespace, left: float) -> str | None:
    """Why ``section`` does not run (one line), or None; ``left`` is the time it may have (:func:`section_limit`)."""
    if left < 20:
        return f"the time budget ({args.budget:.0f} s) is spent"
    if section.name == "env":
        return None
    metrics = env.get("metrics", {})
    if section.needs_gpu and not metrics.get("cuda") and not args.smoke:
        return "no CUDA GPU (see env); --smoke runs it on a tiny model on the CPU"
    if not metrics.get("opct", False):
        return "opct does not import here (see env)"
    if args.tokenizer is None:
        return "no Qwen3 tokenizer folder: pass --tokenizer DIR (a copy of ../shared/models/qwen3-tokenizer)"
    return None


def section_limit(section: Section, later: list[Section], left: float, smoke: bool = False) -> float:
    """The seconds ``section`` may run: its own limit, and no more of what is ``left`` of the budget than
    leaves each section in ``later`` its expected time. A section that runs long is stopped, rather than
    the ones after it skipped (2026-11-28: ``resume`` took its whole 150 s and left ``fsdp`` 29 s). Under
    ``smoke`` (a tiny model on a CPU, slower than the GPU the limits are set for) only the budget limits it."""
    own = math.inf if smoke else float(section.timeout_s)
    return min(own, left - sum(s.expected_s for s in later))


def run_plan(args: argparse.Namespace) -> dict[str, Any]:
    """Every selected section in order, within the budget; the whole report as a dict."""
    start = time.perf_counter()
    chosen = [s for s in PLAN if s.name == "env" or not args.only or s.name in args.only]
    sections: dict[str, dict[str, Any]] = {}
    env: dict[str, Any] = {}
    for i, section in enumerate(chosen):
        limit = section_limit(section, chosen[i + 1:], args.budget - (time.perf_counter() - start), args.smoke)
        why = skip_reason(section, env, args, limit)
        if why:
            sections[section.name] = {"status": "skipped", "seconds": 0.0, "note": why}
        else:
            extra = ["--smoke"] if args.smoke else []
            if args.accelerate_config:
                extra += ["--accelerate-config", str(args.accelerate_config)]
            if env.get("metrics", {}).get("vllm"):
                extra.append("--vllm")
            sections[section.name] = run_section(section, args, limit, extra)
        if section.name == "env":
            env = sections["env"]
        print(f"[{section.name}] {headline(section.name, sections[section.name])}", flush=True)
    missing = list(env.get("missing", []))
    if args.tokenizer is None:
        missing.append("tokenizer: no folder with tokenizer.json and tiny_config.json (--tokenizer DIR, "
                       "$OPCT_TOKENIZER, ./.qwen3-tokenizer, ../shared/models/qwen3-tokenizer)")
    return {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "smoke": args.smoke,
            "budget_s": args.budget, "wall_s": time.perf_counter() - start, "missing": missing,
            "tokenizer": str(args.tokenizer) if args.tokenizer else None,
            "sections": sections, "targets": target_rows(sections)}


# ----------------------------------------------------------------------------------------------
# the summary (tested on a recorded sample: tests/test_device_check.py)


def _f(x: Any, spec: str = ".3g") -> str:
    return "n/a" if x is None else format(x, spec)


def headline(name: str, record: dict[str, Any]) -> str:
    """One line for a section: its status and, when it ran, its main numbers."""
    status = record.get("status", "failed")
    if status != "ok":
        return f"{status}: {record.get('note') or 'no reason recorded'}"
    m = record.get("metrics", {})
    if name == "env":
        gpu = m.get("gpu")
        where = f"{gpu['name']} ({gpu['memory_gib']} GiB)" if gpu else "no GPU"
        return f"ok: {where}, torch {m.get('torch')}, CUDA {m.get('torch_cuda')}, vLLM {'yes' if m.get('vllm') else 'no'}"
    if name == "decode":
        parts = [f"{e} {r['tokens_per_s']:.0f} tok/s, max |dlogp| {_f(r['logprob_agreement']['max_abs_diff'], '.2e')}"
                 for e, r in m.get("engines", {}).items()]
        return "ok: " + "; ".join(parts) + (f" ({record['note']})" if record.get("note") else "")
    if name in ("lora", "full", "fsdp", "memory"):
        memory = m.get("peak_allocated_gib", m.get("peak_rss_gib"))
        line = (f"ok: {_f(m.get('steps_per_s'))} steps/s ({_f(m.get('median_step_s'))} s/step), "
                f"step 1 |loss - KL| {_f(m.get('step1_abs_loss_minus_kl'), '.2e')}")
        if memory is not None:
            line += f", peak memory {memory:.2f} GiB"
        if name == "memory":
            line += f", the dry run's estimate {_f(m.get('estimate_gib'), '.2f')} GiB (peak / estimate {_f(m.get('peak_over_estimate'), '.3f')})"
        if name == "fsdp":
            line += (f", distributed type {m.get('distributed_type')}, resumed at step 2: "
                     f"{'bit-exact' if m.get('resume_bit_exact') else 'NOT bit-exact'}")
        return line
    return "ok"


def _training_table(sections: dict[str, dict[str, Any]]) -> list[str]:
    names = [n for n in ("lora", "full", "memory", "fsdp") if sections.get(n, {}).get("status") == "ok"]
    if not names:
        return []
    rows = ["| run | model | steps | s/step (median, step 1 excluded) | steps/s | tokens/s | peak GiB | "
            "step 1 \\|loss - KL\\| | max \\|log ratio\\| |", "|---|---|---|---|---|---|---|---|---|"]
    for n in names:
        m = sections[n]["metrics"]
        memory = m.get("peak_allocated_gib", m.get("peak_rss_gib"))
        what = n + (" (LoRA, gradient checkpointing)" if n == "memory" else "")
        rows.append(f"| {what} | {m.get('size')} | {m.get('steps')} | {_f(m.get('median_step_s'))} | "
                    f"{_f(m.get('steps_per_s'))} | {_f(m.get('median_tokens_per_s'), '.0f')} | {_f(memory, '.2f')} | "
                    f"{_f(m.get('step1_abs_loss_minus_kl'), '.2e')} | {_f(m.get('max_ratio_abs_log_dev'), '.2e')} |")
    return ["## Training", "", *rows, ""]


def _engines_table(record: dict[str, Any]) -> list[str]:
    if record.get("status") != "ok":
        return []
    m = record["metrics"]
    s = m.get("settings", {})
    rows = [f"## Decode ({m.get('size')}, {_f(m.get('parameters', 0) / 1e6, '.0f')}M parameters, "
            f"{s.get('prompts')} prompts x n={s.get('n')} x {s.get('max_new_tokens')} tokens)", "",
            "| engine | tokens/s | max \\|dlogp\\| | mean \\|dlogp\\| | share > 1e-3 |", "|---|---|---|---|---|"]
    for name, r in m.get("engines", {}).items():
        a = r["logprob_agreement"]
        rows.append(f"| {name} | {r['tokens_per_s']:.0f} | {a['max_abs_diff']:.2e} | {a['mean_abs_diff']:.2e} | "
                    f"{a['share_over_1e-3']:.2%} |")
    return [*rows, ""]


def render_summary(report: dict[str, Any]) -> str:
    """The Markdown summary of a report: where it ran, what is missing, one line per section, the tables."""
    sections = report["sections"]
    env = sections.get("env", {}).get("metrics", {})
    gpu = env.get("gpu")
    where = f"{gpu['name']}, {gpu['memory_gib']} GiB" if gpu else "no CUDA GPU"
    lines = [f"# opct device check{' (smoke: tiny model)' if report.get('smoke') else ''}", "",
             f"{report['date']}; {where}; torch {env.get('torch', 'n/a')} (CUDA {env.get('torch_cuda', 'n/a')}); "
             f"{report['wall_s']:.0f} s of a {report['budget_s']:.0f} s budget.", ""]
    if report.get("missing"):
        lines += ["Missing:", "", *[f"- {m}" for m in report["missing"]], ""]
    counts: dict[str, int] = {}
    for r in sections.values():
        counts[r.get("status", "failed")] = counts.get(r.get("status", "failed"), 0) + 1
    lines += [", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + ".", "",
              "| section | status | seconds | result |", "|---|---|---|---|"]
    for name, r in sections.items():
        text = headline(name, r).replace("|", "\\|")
        lines.append(f"| {name} | {r.get('status')} | {r.get('seconds', 0):.0f} | {text} |")
    lines.append("")
    lines += targets_table(report)
    lines += _engines_table(sections.get("decode", {}))
    lines += _training_table(sections)
    return "\n".join(lines)


def dry_run(args: argparse.Namespace) -> None:
    """Print what the check would measure, where it would write and what it would skip for want of a tokenizer."""
    print(f"opct device check: would write {args.out}/device-check.json, device-check.md and logs/ "
          f"(budget {args.budget:.0f} s{', smoke: tiny model' if args.smoke else ''})")
    print(f"tokenizer: {args.tokenizer or 'NOT FOUND (pass --tokenizer DIR)'}")
    chosen = [s for s in PLAN if s.name == "env" or not args.only or s.name in args.only]
    for s in chosen:
        print(f"- {s.name} (expected {s.expected_s} s, up to {s.timeout_s} s{', needs a GPU' if s.needs_gpu else ''}): "
              f"{s.measures}")
    print(f"expected in all: {sum(s.expected_s for s in chosen)} s of the {args.budget:.0f} s budget "
          f"({EIGHT_MINUTES_S} s: 8 minutes)")
    print("targets: " + "; ".join(t.says for t in TARGETS if t.section in {s.name for s in chosen}))


def main(argv: list[str] | None = None) -> int:
    """Run the check (or list it with ``--dry-run``); returns 0 when every section that ran succeeded."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or REPO / "device-check"))
    ap.add_argument("--tokenizer", default=None, help="Qwen3 tokenizer folder (with tiny_config.json)")
    ap.add_argument("--work", type=Path, default=None, help="models and runs (a temporary folder, removed, if unset)")
    ap.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for all sections together")
    ap.add_argument("--only", default="", help="comma-separated sections (env always runs)")
    ap.add_argument("--smoke", action="store_true", help="every section on a tiny model, on any device")
    ap.add_argument("--accelerate-config", default=None, help="fsdp: the accelerate config to launch (default: "
                    "configs/accelerate/fsdp2.yaml)")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    args.only = [s for s in args.only.split(",") if s]
    args.tokenizer_given = args.tokenizer
    unknown = set(args.only) - {s.name for s in PLAN}
    if unknown:
        ap.error(f"unknown section(s) {', '.join(sorted(unknown))}: choose from {', '.join(s.name for s in PLAN)}")
    if args.dry_run:
        args.tokenizer = find_tokenizer(args.tokenizer)
        if args.tokenizer is None and args.tokenizer_given is None and (SHIPPED_TOKENIZER / "tokenizer.json.xz").is_file():
            args.tokenizer = f"the tree's own, {SHIPPED_TOKENIZER.relative_to(REPO)}/tokenizer.json.xz (unpacked when it runs)"
        dry_run(args)
        return 0
    (args.out / "logs").mkdir(parents=True, exist_ok=True)
    keep = args.work is not None
    args.work = (args.work or Path(tempfile.mkdtemp(prefix="opct-device-check-"))).resolve()
    args.tokenizer = find_tokenizer(args.tokenizer, unpack_to=args.work / "qwen3-tokenizer")
    try:
        report = run_plan(args)
    finally:
        if not keep:
            shutil.rmtree(args.work, ignore_errors=True)
    (args.out / "device-check.json").write_text(json.dumps(report, indent=1, default=str))
    summary = render_summary(report)
    (args.out / "device-check.md").write_text(summary + "\n")
    print(summary)
    return 0 if all(r["status"] in ("ok", "skipped") for r in report["sections"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
