"""A study's last measuring stage: each trained run's KL(fine-tuned ‖ base) (:mod:`opct_lab.diagnostics.kl_to_base`).

For every family experiment of a study with ``levels`` and every trained run with a ``final/`` model, the KL
from the family's base model on that run's own training pairs (its manifest's ``data.train`` sources), on
the run's own samples, is written to ``train/<key>/kl_to_base.json`` once: a rerun keeps it (resumable).
The settings are :data:`KL_SETTINGS` (a smaller sample than the dose's profile: it is measured on every run).
The study report relates it to each run's capability regression and held-out safety (:mod:`opct_lab.report.razor`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from opct.config import ModelConfig
from opct.pairs import load_pair_source
from opct.runs.atomic import write_json_atomic
from opct.runs.layout import RunLayout
from opct_lab.layout import StudyLayout
from opct_lab.report.razor import KL_FILE

#: Pairs per axis, own samples per pair and the answer length of the KL estimate; float32 on CPU.
KL_SETTINGS = {"pairs_per_axis": 50, "samples": 2, "max_new_tokens": 128}


@functools.lru_cache(maxsize=1)
def _load_base(base_model: str) -> Any:
    """The family's base model, loaded once for all of its runs (the runs of a family come one after another)."""
    # deferred: these load torch (a dry run and the report never need it)
    from opct.models import inference_spec, load_spec_for_inference

    return load_spec_for_inference(inference_spec(ModelConfig(name_or_path=base_model, dtype="float32", device="cpu")))[0]


def measure_run_kl(run_dir: Path, base_model: str, sources: list[str]) -> dict[str, Any]:
    """KL(the run's final model ‖ ``base_model``) on ``sources``' pairs, at :data:`KL_SETTINGS`."""
    # deferred: these load torch (a dry run and the report never need it)
    from opct.models import inference_spec, load_spec_for_inference
    from opct_lab.diagnostics.kl_to_base import measure_kl_to_base

    spec = inference_spec(ModelConfig(name_or_path=str(run_dir), dtype="float32", device="cpu"))
    student, tokenizer, _ = load_spec_for_inference(spec)
    base = _load_base(base_model)
    pairs = [p for source in sources for p in load_pair_source(source)]
    return measure_kl_to_base(student, base, tokenizer, pairs, spec=spec, **KL_SETTINGS)


def ensure_run_kls(root: str | Path, families: Mapping[str, str], *, log: Callable[[str], Any] = print,
                   measure: Callable[[Path, str, list[str]], dict[str, Any]] = measure_run_kl) -> dict[str, str]:
    """Measure every finished trained run's KL to its family's base (``families``: family -> base model) where
    its ``kl_to_base.json`` is missing. Returns ``{"family/run": "kept" | "measured" | "not finished"}``."""
    done = {}
    for family, base_model in families.items():
        train = StudyLayout(Path(root)).family(family).train
        for run_dir in sorted(train.iterdir()) if train.is_dir() else []:
            name, run = f"{family}/{run_dir.name}", RunLayout(run_dir)
            if (run_dir / KL_FILE).is_file():
                done[name] = "kept"
            elif not run.final.is_dir() or not run.manifest.is_file():
                done[name] = "not finished"
            else:
                sources = list(json.loads(run.manifest.read_text(encoding="utf-8"))["config"]["data"]["train"])
                log(f"{name}: KL(fine-tuned ‖ base) on its training prompts")
                write_json_atomic(run_dir / KL_FILE, {**measure(run_dir, base_model, sources), "base": base_model,
                                                      "pairs": sources})
                done[name] = "measured"
    return done
