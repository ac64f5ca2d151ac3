"""A synthetic experiment directory (plan, manifest, eval results, training metrics, attacker results).

For tests and demos of the report: the numbers are made up but shaped like the real runner's output.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

from opct.runs.experiment_layout import ExperimentLayout
from opct.runs.layout import RunLayout

METHODS = ("base", "bct", "opct")
SYCO_FAMILIES = {"train": ("suggested_answer", "authority"), "heldout": ("metadata", "peer_pressure")}
JB_FAMILIES = {"train": ("roleplay", "prefix_injection"), "heldout": ("base64", "hypothetical")}
TAUS = (0.0, 0.36, 0.68, 0.84, 0.92, 0.96, 0.98, 0.99, 1.0)

#: Headline values per method: (sycophancy rate, static DSR, awareness strength, MC accuracy, arithmetic).
_LEVELS = {
    "base": (0.41, 0.55, 0.30, 0.62, 0.48),
    "bct": (0.22, 0.80, 0.55, 0.58, 0.40),
    "opct": (0.12, 0.93, 0.70, 0.61, 0.47),
}


def estimate(value: float, n: int, half: float | None = None, method: str = "wilson") -> dict[str, Any]:
    """A ``{value, ci_low, ci_high, n, method}`` record with a symmetric interval clipped to [0, 1]."""
    half = 1.96 * math.sqrt(max(value * (1 - value), 1e-4) / n) if half is None else half
    return {"value": value, "ci_low": max(0.0, value - half), "ci_high": min(1.0, value + half), "n": n, "method": method}


def _results(eval_name: str, metrics: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "eval": eval_name, "model": "organism", "complete": True, "n": n, "n_records": n, "metrics": metrics,
        "unscored": 0, "judges": ["organism-mc@1"], "data_hash": "0" * 16, "generation_config": {"temperature": 0.0}, "seed": 0,
    }


def _sycophancy(level: float, split: str, rng: random.Random) -> dict[str, Any]:
    rate = level * (0.7 if split == "train" else 1.0)
    m = {"sycophancy_rate": estimate(round(rate, 4), 360), "consistency": estimate(0.8, 120), "accuracy_clean": estimate(0.7, 120),
         "accuracy_biased": estimate(0.6, 360)}
    for fam in SYCO_FAMILIES[split]:
        m[f"sycophancy_rate/{fam}"] = estimate(min(1.0, rate * rng.uniform(0.7, 1.3)), 180)
    return m


def _jailbreak(level: float, split: str, rng: random.Random) -> dict[str, Any]:
    dsr = min(1.0, level * (1.05 if split == "train" else 1.0))
    m = {"dsr": estimate(round(dsr, 4), 400), "refusal_rate_plain": estimate(0.9, 50), "over_refusal": estimate(0.1, 50)}
    for fam in JB_FAMILIES[split]:
        m[f"dsr/{fam}"] = estimate(min(1.0, dsr * rng.uniform(0.85, 1.1)), 200)
    return m


def _awareness(strength: float, split: str) -> dict[str, Any]:
    s = strength * (1.1 if split == "train" else 1.0)
    curve = [1.0] + [max(0.0, min(1.0, s * (1 - t) ** 0.25 + 0.05 * (1 - t))) for t in TAUS[1:]]
    m = {f"S@{t:g}": estimate(v, 50, 0.08, "bootstrap") for t, v in zip(TAUS, curve, strict=True)}
    ausc = sum(curve) / len(curve)
    m["ausc_9"] = estimate(ausc, 50, 0.05, "bootstrap")
    m["ausc_101"] = estimate(round(ausc * 0.97, 4), 50, 0.05, "bootstrap")
    m["model_score"] = estimate(curve[-1], 50, 0.05, "bootstrap")
    m["mean_pass_rate"] = estimate(min(1.0, s + 0.1), 50, 0.05, "bootstrap")
    return m


def _train_metrics(method: str, steps: int, rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for step in range(1, steps + 1):
        row = {"step": step, "loss": 2.0 * math.exp(-step / 15) + 0.3 + rng.gauss(0, 0.05), "completion_len": 40 + rng.gauss(0, 3),
               "lr": 1e-5 * min(1.0, step / 5)}
        if method == "opct":
            row["kl_to_teacher"] = 0.6 * math.exp(-step / 20) + 0.05 + abs(rng.gauss(0, 0.02))
        rows.append(row)
    return rows


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _samples(root: Path, method: str, rng: random.Random) -> None:
    """Per-sample records behind the paired differences: held-out sycophancy (40 questions, clean and 11
    biased variants) and awareness (25 facts x 8 perturbations), at the method's levels; as many records
    as their ``results.json`` counts (``n_records``), so that the report verifies them."""
    syco, _, aware, _, _ = _LEVELS[method]
    recs: list[dict[str, Any]] = []
    for q in range(40):
        recs.append({"item_id": f"q{q}", "variant": "clean", "parsed": "A", "outcome": "scored", "scores": {}})
        recs += [{"item_id": f"q{q}", "variant": f"b{v}", "parsed": "B", "outcome": "scored",
                  "scores": {"suggested": rng.random() < syco}} for v in range(11)]
    _write_jsonl(ExperimentLayout(root).eval(method).samples("sycophancy"), recs)
    recs = [{"variant": f"p{v}", "outcome": "scored", "meta": {"fact": f"f{f}"},
             "scores": {"pass": float(rng.random() < aware + 0.2)}} for f in range(25) for v in range(8)]
    _write_jsonl(ExperimentLayout(root).eval(method).samples("awareness"), recs)


def _attack_behaviors(dsr: float, rng: random.Random) -> list[dict[str, Any]]:
    """Per behaviour: cracked or not by the adaptive attacker (for its paired differences)."""
    out = []
    for i in range(100):
        cracked = rng.random() > dsr
        out.append({"behavior_id": f"b{i}", "cracked": cracked, "status": "cracked" if cracked else "defended"})
    return out


def make_experiment(root: str | Path, steps: int = 60, with_attack: bool = True, seed: int = 0,
                    samples: bool = False) -> Path:
    """Write a synthetic three-method experiment directory under ``root`` and return it.

    Fixed cells (for tests): base's held-out sycophancy rate is ``0.41`` (n=360); BCT has no
    ``capability_arithmetic`` result; the attacker was run against BCT and OPCT only. ``samples``:
    also write per-sample records and per-behaviour attack results, so that the report has paired
    differences between methods.
    """
    root = Path(root)
    layout = ExperimentLayout(root)
    rng = random.Random(seed)
    _write(layout.plan, {"name": "synthetic", "model": "organism", "methods": list(METHODS),
                                "axes": ["sycophancy", "jailbreak", "awareness"], "seeds": [0]})
    _write(layout.manifest, {"kind": "experiment", "config": {"model": "organism", "steps": steps},
                                    "versions": {"python": "3.11", "opct": "0.1.0"}, "created": "2026-01-01T00:00:00+0000"})
    for method in METHODS:
        syco, dsr, aware, mc, arith = _LEVELS[method]
        for split, suffix in (("heldout", ""), ("train", "_train")):
            _write(layout.eval(method).results(f"sycophancy{suffix}"), _results("sycophancy", _sycophancy(syco, split, rng), 480))
            _write(layout.eval(method).results(f"jailbreak{suffix}"), _results("jailbreak", _jailbreak(dsr, split, rng), 500))
            _write(layout.eval(method).results(f"awareness{suffix}"), _results("awareness", _awareness(aware, split), 200))
        _write(layout.eval(method).results("capability_mc"), _results("capability_mc", {"accuracy": estimate(mc, 200)}, 200))
        if samples:
            _samples(root, method, rng)
        if method != "bct":
            _write(layout.eval(method).results("capability_arithmetic"),
                   _results("capability_arithmetic", {"accuracy": estimate(arith, 150)}, 150))
        if method != "base":
            rows = _train_metrics(method, steps, rng)
            path = RunLayout(layout.run(method)).metrics
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            if with_attack:
                adaptive = dsr * 0.9
                attack = {"n": 100, "metrics": {
                    "dsr": estimate(round(adaptive, 4), 100), "asr": estimate(round(1 - adaptive, 4), 100),
                    "attempt_success/persona": estimate(1 - adaptive, 50)}, "queries_to_crack": {"median": 12.0, "n_cracked": 40},
                    "status": "ok", "outcomes": {"behaviors": {"cracked": 40, "defended": 60, "unscored": 0}}}
                if samples:
                    attack["behaviors"] = _attack_behaviors(adaptive, rng)
                if method == "bct":  # the static single-wrapper baseline was run beside the search for BCT only
                    attack["static"] = {"n": 100, "static_cracked": 30, "search_cracked_of_static": 28,
                                        "search_beyond_static": [f"b{i}" for i in range(12)]}
                _write(layout.attack(method).results, attack)
    return root
