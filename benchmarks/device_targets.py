"""Issue 57's GPU targets, judged from the device check's section results (``benchmarks/device_check.py``):
each target's measured value, and met, not met, or not measured (its section did not finish, or the fast
decoder is not in the checkout); tested in ``tests/test_device_check.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Target:
    """A GPU target of issue 57: the section it reads, what it says, and how it is judged from its metrics."""

    section: str
    says: str
    unit: str


TARGETS = (
    Target("probe", "static decoder keeps the decoder rule on live weights after an in-place change (LoRA, full)",
           "rule kept"),
    Target("decode", "fast decoder >= 10x HF generate (same run)", "x generate"),
    Target("decode", "fast decoder >= 15,000 tok/s", "tok/s"),
    Target("lora", "1.7B-shape LoRA OPCT step <= 1.0 s", "s/step"),
    Target("full", "1.7B-shape full fine-tuning step <= 0.8 s", "s/step"),
    Target("memory", "4B-shape step fits, peak within 15% of the dry run's estimate", "peak / estimate"),
    Target("fsdp", "FSDP2 trains, checkpoints and resumes bit-exactly", "resume bit-exact"),
)


def _fast_engine(engines: dict[str, Any]) -> str | None:
    return "opct-fast" if "opct-fast" in engines else None


def target_value(target: Target, record: dict[str, Any]) -> tuple[Any, bool | None]:
    """A target's measured value and whether it is met (None: not measured: the section did not finish, or
    the fast decoder is not in this checkout)."""
    m = record.get("metrics", {})
    if target.section == "fsdp":
        if "resume_bit_exact" not in m:
            return None, None
        return m["resume_bit_exact"], bool(m["resume_bit_exact"] and m.get("sharded") and record.get("status") == "ok")
    if target.section == "probe":
        variants = m.get("variants")
        if not variants:
            return None, None
        kept = all(v["kept"] and v["change_tells_stale_from_live"] for v in variants.values())
        return ", ".join(f"{name} {'yes' if v['kept'] else 'no'}" for name, v in variants.items()), kept
    if record.get("status") != "ok":
        return None, None
    if target.section == "decode":
        engines = m.get("engines", {})
        fast = _fast_engine(engines)
        if fast is None or "hf-generate" not in engines:
            return None, None
        tok_s = engines[fast]["tokens_per_s"]
        if "10x" in target.says:
            ratio = tok_s / engines["hf-generate"]["tokens_per_s"]
            return ratio, ratio >= 10
        return tok_s, tok_s >= 15000
    if target.section in ("lora", "full"):
        limit = 1.0 if target.section == "lora" else 0.8
        return m.get("median_step_s"), m.get("median_step_s") is not None and m["median_step_s"] <= limit
    ratio = m.get("peak_over_estimate")
    if ratio is None or "peak_allocated_gib" not in m:
        return ratio, None
    return ratio, abs(ratio - 1.0) <= 0.15


def target_rows(sections: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target with its measured value and ``met`` (True, False, or None when not measured)."""
    rows = []
    for t in TARGETS:
        value, met = target_value(t, sections.get(t.section, {}))
        rows.append({"section": t.section, "target": t.says, "unit": t.unit, "value": value, "met": met})
    return rows


def targets_table(report: dict[str, Any]) -> list[str]:
    """The summary's targets table: each target, its measured value, and met / NOT met / not measured."""
    rows = report.get("targets") or target_rows(report["sections"])
    title = "## Targets (issue 57)" + (" (smoke: a tiny model on the CPU, not the targets' measurement)"
                                       if report.get("smoke") else "")
    lines = [title, "", "| target | measured | met |", "|---|---|---|"]
    for r in rows:
        value = r["value"]
        if value is None:
            shown = "n/a"
        elif isinstance(value, bool | str):  # a yes/no, or a sentence (the probe: "lora yes, full yes")
            shown = str(value)
        else:
            shown = f"{value:.3g} {r['unit']}"
        met = {True: "met", False: "NOT met", None: "not measured"}[r["met"]]
        lines.append(f"| {r['target']} | {shown} | {met} |")
    return [*lines, ""]
