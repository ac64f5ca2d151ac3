"""``opct demo --full``: the pooled bootstrap and the verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from opct.intervals import pooled_paired_difference
from opct.report.pooled import (
    HOLDS,
    NO_CLAIM,
    NOT_MEASURED,
    NOT_RESOLVED,
    PAPER_DIRECTION,
    REVERSED,
    paper_direction,
    split_run_key,
    verdict,
)

FAMILIES = ("llama", "qwen3", "gpt2")


# --- the pooled bootstrap ------------------------------------------------------------------------


def binary_cells(deltas: dict[str, list[float]], units: int = 60, rows: int = 4, base: float = 0.5,
                 seed: int = 0) -> dict[tuple[str, int], tuple[dict, dict]]:
    """(family, seed) cells of yes/no rows: A's rate is ``base + delta`` of that seed, B's ``base``."""
    rng = np.random.default_rng(seed)
    out = {}
    for family, per_seed in deltas.items():
        for s, delta in enumerate(per_seed):
            a = {f"u{u}": list((rng.random(rows) < base + delta).astype(float)) for u in range(units)}
            b = {f"u{u}": list((rng.random(rows) < base).astype(float)) for u in range(units)}
            out[(family, s)] = (a, b)
    return out


def test_a_known_difference_is_recovered_and_excludes_zero():
    res = pooled_paired_difference(binary_cells({f: [-0.2] * 3 for f in FAMILIES}))
    est = res.estimate
    assert abs(est.value + 0.2) < 0.04 and est.ci_low < -0.2 < est.ci_high and est.ci_high < 0
    assert (res.cells, est.clusters, est.n) == (9, 60, 9 * 60 * 4)  # units shared by every cell count once
    assert set(res.per_family) == set(FAMILIES) and len(res.per_cell) == 9
    assert est.value == pytest.approx(np.mean(list(res.per_family.values())))
    assert verdict("lower", est.ci_low, est.ci_high) == HOLDS
    assert verdict("higher", est.ci_low, est.ci_high) == REVERSED


def test_all_zero_differences_are_not_resolved():
    cells = {key: (a, {u: list(v) for u, v in a.items()}) for key, (a, _) in binary_cells({f: [0.0] * 3 for f in FAMILIES}).items()}
    est = pooled_paired_difference(cells).estimate
    assert est.value == 0.0 and est.ci_low < 0 < est.ci_high  # collapsed to zero width, widened as for one pair
    assert verdict("lower", est.ci_low, est.ci_high) == verdict("higher", est.ci_low, est.ci_high) == NOT_RESOLVED


def test_a_reversed_effect_is_reversed():
    est = pooled_paired_difference(binary_cells({f: [0.25] * 3 for f in FAMILIES})).estimate
    assert est.ci_low > 0
    assert verdict(PAPER_DIRECTION["sycophancy"][0], est.ci_low, est.ci_high) == REVERSED


def continuous_cells(deltas: dict[str, list[float]], units: int = 40) -> dict[tuple[str, int], tuple[dict, dict]]:
    """A = B + the seed's delta + a little unit noise (the same noise whatever the deltas)."""
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.01, size=units)
    b = {f"u{u}": [float(rng.random())] for u in range(units)}
    return {(f, s): ({u: [v[0] + d + noise[i]] for i, (u, v) in enumerate(b.items())}, b)
            for f, per_seed in deltas.items() for s, d in enumerate(per_seed)}


def test_seeds_are_resampled_the_interval_widens_when_seeds_disagree():
    agree = pooled_paired_difference(continuous_cells({f: [0.1, 0.1, 0.1] for f in FAMILIES})).estimate
    disagree = pooled_paired_difference(continuous_cells({f: [-0.2, 0.1, 0.4] for f in FAMILIES})).estimate
    assert agree.value == pytest.approx(disagree.value)
    assert disagree.ci_high - disagree.ci_low > 5 * (agree.ci_high - agree.ci_low)
    assert disagree.ci_low < 0 < disagree.ci_high and agree.ci_low > 0


def test_families_weigh_the_same_whatever_their_seeds():
    cells = continuous_cells({"one": [0.3], "three": [0.0, 0.0, 0.0]})
    res = pooled_paired_difference(cells)
    assert res.estimate.value == pytest.approx(0.15, abs=0.01) and res.cells == 4


def test_a_statistic_gives_the_same_answer_as_the_pooled_mean():
    cells = binary_cells({"a": [0.1, 0.2], "b": [0.0]}, units=20)

    def pooled_mean(groups: list) -> float:
        return float(sum(sum(g) for g in groups) / sum(len(g) for g in groups))

    fast = pooled_paired_difference(cells, n_resamples=300).estimate
    slow = pooled_paired_difference(cells, pooled_mean, n_resamples=300).estimate
    assert (fast.value, fast.ci_low, fast.ci_high) == pytest.approx((slow.value, slow.ci_low, slow.ci_high))


def test_cells_without_shared_units_are_left_out():
    cells = {("a", 0): ({"u1": [1.0]}, {"u2": [0.0]}), ("a", 1): ({}, {})}
    res = pooled_paired_difference(cells)
    assert res.cells == 0 and math.isnan(res.estimate.value)
    assert verdict("lower", res.estimate.ci_low, res.estimate.ci_high) == NOT_MEASURED


def test_verdict_edges_and_the_direction_table():
    assert verdict("higher", 0.0, 0.3) == NOT_RESOLVED  # an end at 0 does not exclude 0
    assert verdict(None, 0.1, 0.3) == NO_CLAIM
    with pytest.raises(ValueError):
        verdict("up", 0.1, 0.2)
    assert paper_direction("sycophancy")[0] == "lower" and paper_direction("dsr_adaptive")[0] == "higher"
    assert paper_direction("cap:capability_mc")[0] == "higher" and paper_direction("cap:gpqa")[0] == "higher"
    assert paper_direction("toy_axis") is None


def test_run_keys_split_into_method_and_seed():
    assert split_run_key("opct-s2", [0, 1, 2]) == ("opct", 2)
    assert split_run_key("opct", [5]) == ("opct", 5)
    assert split_run_key("base", [0, 1]) == ("base", None)
    assert split_run_key("opct-s7", [0, 1]) == ("opct-s7", None)
