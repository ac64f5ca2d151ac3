"""The pre-registered trend test's inputs kept as a file, so that the test can be read again with one level's
runs replaced (docs/mechanism.md, amendment (a): L4 trained again on its re-selected picks) without the other
levels' run folders, which do not outlive the machine that trained them.

Per level: its index and seed (the level's bootstrap is seeded ``DEFAULT_SEED + index``, as the study report's
dose-response section seeds it, :func:`opct_lab.report.levels.levels_data`), its dose, and each metric's pooled
OPCT − BCT (:func:`opct.report.pooled.pooled_rows`) with its 2,000 bootstrap resamples. :func:`trends_from_inputs`
reads them back into :func:`opct_lab.report.trend.trend` and :func:`~opct_lab.report.trend.read_hypothesis`, the
same functions as the report (each trend with its metric's header, and whether it is a rate, ``percent``: None in
a file written before that was kept); :func:`replace_level` swaps one level's entry for another file's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from opct.report.dose_response import Dose
from opct.report.experiment import Experiment
from opct.report.metric import json_number
from opct.stats.estimate import Estimate
from opct.stats.paired import PooledDifference
from opct_lab.report.levels import level_rows
from opct_lab.report.trend import LevelPoint, study_hypothesis, trend, trend_record

#: The file's format version: a reader refuses another.
FORMAT = 1


def level_inputs(root: str | Path, levels: Mapping[str, Sequence[str]], families: Mapping[str, Experiment],
                 n_resamples: int = 2000, indices: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The inputs of every level of ``levels`` whose families were found. ``indices``: a level's index in the
    whole study when ``levels`` is a part of it (default: its position here), which seeds its bootstrap."""
    out = []
    for lv in level_rows(root, levels, families, n_resamples, indices):
        metrics = {}
        for row in lv.rows:
            est = row.difference.estimate
            metrics[row.column.key] = {
                "header": row.column.header, "percent": row.column.percent,
                "direction": row.direction[0] if row.direction else None,
                "estimate": {"value": json_number(est.value), "ci_low": json_number(est.ci_low),
                             "ci_high": json_number(est.ci_high), "n": est.n, "method": est.method,
                             "clusters": est.clusters},
                "cells": row.difference.cells, "incomplete": list(row.incomplete),
                "draws": [json_number(v) for v in row.difference.draws]}
        dose = lv.dose
        out.append({"level": lv.level, "index": lv.index, "seed": lv.seed, "families": list(lv.names),
                    "measured_families": list(lv.found), "no_profile": lv.no_profile,
                    "dose": None if dose is None else {"value": dose.value, "ci_low": dose.ci_low, "ci_high": dose.ci_high},
                    "metrics": metrics})
    return {"format": FORMAT, "resamples": n_resamples, "levels": out}


def replace_level(inputs: Mapping[str, Any], replacement: Mapping[str, Any], level: str) -> dict[str, Any]:
    """``inputs`` with ``level``'s entry taken from ``replacement`` (another file of this format, whose entry must
    have the same index and resamples and a measured dose)."""
    new = next((lv for lv in replacement["levels"] if lv["level"] == level), None)
    old = next((lv for lv in inputs["levels"] if lv["level"] == level), None)
    if new is None or old is None:
        raise ValueError(f"level {level!r} is not in both files")
    if new["index"] != old["index"] or replacement["resamples"] != inputs["resamples"]:
        raise ValueError(f"level {level!r}: index {new['index']} / {replacement['resamples']} resamples, expected "
                         f"index {old['index']} / {inputs['resamples']} (its bootstrap must be seeded as the study's)")
    return {**inputs, "levels": [new if lv["level"] == level else lv for lv in inputs["levels"]]}


def _difference(rec: Mapping[str, Any]) -> PooledDifference:
    est = {k: math.nan if v is None and k in ("value", "ci_low", "ci_high") else v for k, v in rec["estimate"].items()}
    draws = np.array([math.nan if v is None else v for v in rec["draws"]], dtype=float)
    return PooledDifference(Estimate(**est), rec["cells"], draws=draws)


def trends_from_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Every metric's trend and the hypothesis's reading from ``inputs``, as the study report computes them."""
    if inputs.get("format") != FORMAT:
        raise ValueError(f"trend inputs of format {inputs.get('format')!r}; this reader knows format {FORMAT}")
    points: dict[str, list[LevelPoint]] = {}
    directions: dict[str, str | None] = {}
    labels: dict[str, dict[str, Any]] = {}
    doses = []
    for lv in inputs["levels"]:
        dose = lv["dose"]
        doses.append(None if dose is None else Dose(dose["value"], dose["ci_low"], dose["ci_high"]))
        for key, rec in lv["metrics"].items():
            directions.setdefault(key, rec["direction"])
            labels.setdefault(key, {"header": rec.get("header", key), "percent": rec.get("percent")})
            if dose is not None:
                points.setdefault(key, []).append(LevelPoint(lv["level"], dose["value"], _difference(rec)))
    trends = {key: trend(points.get(key, []), directions[key]) for key in directions}
    reading = study_hypothesis(trends, doses)
    return {"trends": {k: {**labels[k], **trend_record(t)} for k, t in trends.items()},
            "hypothesis": {"outcome": reading.outcome, "reasons": reading.reasons}}
