"""A judge's agreement with a reader: accuracy and Cohen's kappa, with intervals over clusters.

A judge's number is trusted only as far as its agreement with someone who read the responses. The reader's
labels are the reference; ``unclear`` ones are left out. Accuracy is a rate (cluster-Wilson over the
clusters, e.g. behaviours: several responses to one request are not independent); Cohen's kappa,
``(p_o - p_e) / (1 - p_e)`` with ``p_e`` from the two raters' label margins, gets a percentile bootstrap that
resamples whole clusters. Kappa is undefined (``nan``) when both raters use one and the same label only
(``p_e = 1``): agreement then says nothing beyond the margins, and no kappa threshold can be met.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from opct.stats.estimate import DEFAULT_RESAMPLES, DEFAULT_SEED, Estimate, bootstrap, group_rows
from opct.stats.intervals import cluster_rate


def cohen_kappa(judge: Sequence[Hashable], reader: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters' labels of the same items (``nan`` when chance agreement is 1 or no items)."""
    if len(judge) != len(reader):
        raise ValueError(f"the raters labelled different numbers of items: {len(judge)} vs {len(reader)}")
    n = len(judge)
    if n == 0:
        return math.nan
    observed = sum(a == b for a, b in zip(judge, reader, strict=True)) / n
    margins_a, margins_b = Counter(judge), Counter(reader)
    chance = sum(margins_a[label] * margins_b[label] for label in margins_a) / (n * n)
    return math.nan if chance >= 1.0 else (observed - chance) / (1.0 - chance)


@dataclass(frozen=True)
class Agreement:
    """A judge against a reader: ``accuracy`` (share of items labelled alike), ``kappa``, the items compared,
    the reader's ``unclear`` items left out, and the confusion counts ``(judge, reader) -> count``."""

    accuracy: Estimate
    kappa: Estimate
    items: int
    left_out: int
    confusion: dict[tuple[Hashable, Hashable], int]


def judge_agreement(judge: Sequence[Hashable], reader: Sequence[Hashable], clusters: Sequence[Hashable], *,
                    unclear: Hashable = "unclear", n_resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED) -> Agreement:
    """The agreement of ``judge``'s labels with ``reader``'s on the same items (``clusters[i]``: item i's
    cluster), the reader's ``unclear`` items left out (module docstring)."""
    if not len(judge) == len(reader) == len(clusters):
        raise ValueError("judge, reader and clusters must have one entry per item")
    keep = [i for i, label in enumerate(reader) if label != unclear]
    pairs = [(judge[i], reader[i], clusters[i]) for i in keep]
    accuracy = cluster_rate([a == b for a, b, _ in pairs], [c for _, _, c in pairs])
    units = group_rows(pairs, key=lambda row: row[2])

    def kappa_of(resampled: Sequence[list[tuple[Hashable, Hashable, Hashable]]]) -> float:
        rows = [row for unit in resampled for row in unit]
        return cohen_kappa([a for a, _, _ in rows], [b for _, b, _ in rows])

    kappa = bootstrap(units, kappa_of, n_resamples=n_resamples, seed=seed)
    kappa = Estimate(kappa.value, kappa.ci_low, kappa.ci_high, len(pairs), "cluster-bootstrap", len(units))
    confusion = Counter((a, b) for a, b, _ in pairs)
    return Agreement(accuracy, kappa, len(pairs), len(reader) - len(keep), dict(confusion))
