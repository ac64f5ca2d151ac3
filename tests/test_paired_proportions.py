"""Tango's paired score interval, against Fagerland et al.'s own R code, and the items a "no worse" claim needs."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from opct.stats.estimate import Z_95
from opct.stats.paired import PAIRED_CLUSTER_BOOTSTRAP, paired_cluster_difference, pooled_paired_difference
from opct.stats.paired_proportions import (
    PAIRED_SCORE,
    narrowest_interval,
    noninferiority_items,
    noninferiority_power,
    tango_interval,
)

REFERENCE = Path(__file__).parent / "fixtures" / "tango" / "reference.json"


@pytest.mark.parametrize("row", json.loads(REFERENCE.read_text()), ids=lambda r: "-".join(map(str, r["table"])))
def test_matches_the_r_package_contingencytables(row):
    n11, n12, n21, n22 = row["table"]
    lower, upper = tango_interval(n12, n21, n11 + n12 + n21 + n22)
    # the R code stops its root search at a tolerance of 1e-7
    assert lower == pytest.approx(row["lower"], abs=1e-6)
    assert upper == pytest.approx(row["upper"], abs=1e-6)
    assert lower <= row["estimate"] <= upper


@pytest.mark.parametrize("n", [10, 120, 189, 1000])
def test_perfect_agreement_is_the_uncertainty_of_n_items(n):
    bound = Z_95**2 / (n + Z_95**2)
    assert tango_interval(0, 0, n) == pytest.approx((-bound, bound), abs=1e-12)


def test_one_discordant_item_widens_the_interval_where_the_bootstrap_narrows_it():
    items = {f"q{i}": [1.0] for i in range(120)}
    one_wrong = dict(items, q0=[0.0])
    bootstrap = paired_cluster_difference(one_wrong, items)
    score = paired_cluster_difference(one_wrong, items, score=True)
    perfect = paired_cluster_difference(items, items, score=True)
    assert bootstrap.method == PAIRED_CLUSTER_BOOTSTRAP and score.method == PAIRED_SCORE
    # the bootstrap's lower end at one discordant item is above the perfect-agreement floor: backwards
    assert bootstrap.ci_low > perfect.ci_low
    assert score.ci_low < perfect.ci_low
    assert score.ci_low == pytest.approx(tango_interval(0, 1, 120)[0])


def test_more_discordance_against_a_never_raises_the_lower_end():
    lows = [tango_interval(0, c, 120)[0] for c in range(0, 12)]
    assert all(later < earlier for earlier, later in itertools.pairwise(lows))


def test_real_valued_counts_sit_between_their_integer_neighbours():
    low_1, low_2 = tango_interval(0, 1, 120)[0], tango_interval(0, 2, 120)[0]
    assert low_2 < tango_interval(0, 1.5, 120)[0] < low_1


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="b \\+ c <= n"):
        tango_interval(5, 6, 10)
    with pytest.raises(ValueError, match="0 <= b"):
        tango_interval(-1, 0, 10)
    assert all(math.isnan(x) for x in tango_interval(0, 0, 0))


def test_rows_that_are_not_right_or_wrong_keep_the_bootstrap():
    a = {"u1": [0.5, 1.0], "u2": [1.0, 0.0]}
    b = {"u1": [1.0, 1.0], "u2": [0.0, 0.0]}
    assert paired_cluster_difference(a, b, score=True).method == PAIRED_CLUSTER_BOOTSTRAP
    uneven = {"u1": [1.0], "u2": [1.0, 0.0]}
    assert paired_cluster_difference(uneven, b, score=True).method == PAIRED_CLUSTER_BOOTSTRAP


def test_a_pooled_study_takes_its_units_as_the_sample_size():
    units = {f"q{i}": [1.0] for i in range(120)}
    wrong_in_one_seed = dict(units, q0=[0.0])
    cells = {("llama", 0): (wrong_in_one_seed, units), ("llama", 1): (units, units), ("llama", 2): (units, units)}
    pooled = pooled_paired_difference(cells, score=True).estimate
    assert pooled.method == PAIRED_SCORE and pooled.clusters == 120
    # one discordant unit in one of three seeds: a third of a discordant unit among 120
    assert pooled.ci_low == pytest.approx(tango_interval(0, 1 / 3, 120)[0])
    perfect = pooled_paired_difference({key: (units, units) for key in cells}, score=True).estimate
    assert pooled.ci_low < perfect.ci_low == pytest.approx(-Z_95**2 / (120 + Z_95**2))


def test_power_at_no_discordance_is_a_step_at_189_items():
    assert noninferiority_power(188, 0.0, 0.02) == 0.0
    assert noninferiority_power(189, 0.0, 0.02) == 1.0
    assert noninferiority_items(0.0, 0.02) == 189


def test_power_agrees_with_a_simulation():
    rng = np.random.default_rng(0)
    items, discordance, margin = 400, 0.02, 0.02
    draws = rng.multinomial(items, [discordance / 2, discordance / 2, 1 - discordance], size=4000)
    shown = np.mean([tango_interval(b, c, items)[0] > -margin for b, c, _ in draws])
    exact = noninferiority_power(items, discordance, margin)
    assert abs(shown - exact) < 3 * math.sqrt(exact * (1 - exact) / 4000) + 1e-3


def test_items_needed_rise_with_discordance():
    at_1 = noninferiority_items(0.01, 0.02)
    at_2 = noninferiority_items(0.02, 0.02)
    assert 189 < at_1 < at_2
    assert noninferiority_power(at_2, 0.02, 0.02) >= 0.8 > noninferiority_power(at_2 - 40, 0.02, 0.02)


def test_the_narrowest_interval_bounds_every_table_with_that_value():
    low, high = narrowest_interval(-0.025, 120)
    assert (low, high) == pytest.approx(tango_interval(0, 3, 120))
    for plus in (1, 2, 5):  # the same value with more discordant items on both sides: wider
        wider = tango_interval(plus, plus + 3, 120)
        assert wider[0] < low and wider[1] > high
    assert all(math.isnan(x) for x in narrowest_interval(0.0, 0))
