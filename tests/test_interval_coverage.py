"""Coverage of the 95% cluster-Wilson interval (opct.stats.intervals.cluster_rate) by simulation.

Clustered beta-binomial data: cluster c has m_c rows and its own rate r_c ~ Beta(p(1-ρ)/ρ, (1-p)(1-ρ)/ρ)
(mean p, intra-cluster correlation ρ; r_c = p when ρ = 0), and y_c ~ Binomial(m_c, r_c) successes.
Cluster sizes repeat 5, 10, 15 rows (uneven, mean 10, so Kish's effective number of clusters is below
k). The grid is every combination of the true rate p ∈ {0.02, 0.1, 0.3, 0.5}, ρ ∈ {0, 0.1, 0.3} and
k ∈ {8, 20, 50} clusters; in each cell ``REPLICATES`` data sets are drawn with a seeded
``numpy.random.Generator`` and the share of intervals that contain p must be at least 93%.

``REPLICATES`` is 4000, not a few hundred: the lowest true coverage on the grid is about 94%
(p = 0.1, ρ = 0.3, k = 50, where skewed cluster rates leave the upper bound a little short: 93.8% in
10 000 replicates; p = 0.3, ρ = 0.1 or 0.3, k = 20: 94.3–94.5%), and with 400 replicates the
standard error (1.2 points) would let a 94% cell fall under 93% by chance. At 4000 it is 0.38 points.
No cell is left out. Rates near 0 with few clusters are covered conservatively (≥ 96.5%): an interval
that is monotone in the number of successes must reach the upper bound of 0 successes on k clusters.

The intervals are computed by :func:`cluster_rate_from_counts` on the cluster counts (the same
estimate as :func:`cluster_rate` on the rows, checked on the first data sets of every cell), so the
whole simulation runs in a few seconds on one core.
"""

from __future__ import annotations

import numpy as np
import pytest

from opct.stats.intervals import cluster_rate, cluster_rate_from_counts

RATES = (0.02, 0.1, 0.3, 0.5)
ICCS = (0.0, 0.1, 0.3)
CLUSTERS = (8, 20, 50)
REPLICATES = 4000
SEED = 20240601
MIN_COVERAGE = 0.93


def _sizes(k: int) -> np.ndarray:
    return np.resize(np.array([5, 10, 15]), k)


def _draw(rng: np.random.Generator, p: float, icc: float, sizes: np.ndarray, reps: int) -> np.ndarray:
    """``reps`` data sets of per-cluster success counts, shape (reps, k)."""
    if icc == 0.0:
        rates = np.full((reps, sizes.size), p)
    else:
        rates = rng.beta(p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc, size=(reps, sizes.size))
    return rng.binomial(sizes, rates)


def _rows(successes: np.ndarray, sizes: np.ndarray) -> tuple[list[bool], list[int]]:
    outcomes: list[bool] = []
    clusters: list[int] = []
    for c, (s, m) in enumerate(zip(successes.tolist(), sizes.tolist(), strict=True)):
        outcomes += [True] * s + [False] * (m - s)
        clusters += [c] * m
    return outcomes, clusters


def test_cluster_wilson_covers_at_least_93_percent_in_every_cell() -> None:
    rng = np.random.default_rng(SEED)
    coverage: dict[tuple[float, float, int], float] = {}
    for p in RATES:
        for icc in ICCS:
            for k in CLUSTERS:
                sizes = _sizes(k)
                counts = _draw(rng, p, icc, sizes, REPLICATES)
                hits = 0
                for i, row in enumerate(counts):
                    est = cluster_rate_from_counts(row, sizes)
                    if i < 3:  # the estimate cluster_rate gives on the rows
                        rows = cluster_rate(*_rows(row, sizes))
                        assert (rows.ci_low, rows.ci_high) == pytest.approx((est.ci_low, est.ci_high))
                    assert est.ci_high > est.ci_low
                    hits += est.ci_low <= p <= est.ci_high
                coverage[(p, icc, k)] = hits / REPLICATES
    table = "\n".join(f"p={p:<5} icc={icc:<4} k={k:<3} coverage={c:.4f}" for (p, icc, k), c in coverage.items())
    assert min(coverage.values()) >= MIN_COVERAGE, table
