"""A recipe selection once per model family of a study (``opct-lab demo-full --reselect``): each family's model, in
its own folder ``<selection output_dir>/<family>/``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from opct_lab.selection.run import load_selection, run_selection
from opct_lab.study.config import StudyConfig


def select_per_family(study: StudyConfig, selection_file: str | Path, jobs: int = 1, log: Callable[[str], Any] = print,
                      overrides: list[str] | None = None) -> dict[str, Path]:
    """Run the selection of ``selection_file`` once per family of ``study`` (the family's model, its own
    folder ``<selection output_dir>/<family>/``; resumable); returns each family's ``selection.json``."""
    out = {}
    for family, model in study.families.items():
        base = load_selection(selection_file, overrides)
        cfg = load_selection(selection_file, [*(overrides or []), f"model.name_or_path={model}",
                                              f"output_dir={Path(base.output_dir) / family}"])
        log(f"[select] family {family}: {model} -> {cfg.root}")
        out[family] = run_selection(cfg, jobs=jobs, log=log)
    return out
