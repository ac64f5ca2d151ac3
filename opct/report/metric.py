"""One reported number (:class:`Metric`): read from a results record, checked for being a measurement, and
written to ``report.json`` as strict JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


def json_number(x: float | None) -> float | None:
    """``x`` for ``report.json`` (strict JSON): ``None`` for a missing, NaN or infinite number."""
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class Metric:
    """One reported number: value with optional 95% interval and denominator."""

    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    #: Records (or behaviours) left out of ``n`` by outcome class, e.g. ``{"empty": 3}``.
    unscored: dict[str, int] = field(default_factory=dict)
    #: The eval (or attack) it comes from has more unscored records than its limit allows.
    incomplete: bool = False
    #: Records kept in ``n`` as failures, by outcome class (capability: ``{"truncated": 22}`` answers wrong).
    counted_wrong: dict[str, int] = field(default_factory=dict)
    #: The range a measurement of this metric lies in (:func:`declared_range`): [0, 1] for a share or an area,
    #: [-1, 1] for a signed difference of two shares. Not written to ``report.json``.
    bounds: tuple[float, float] = (0.0, 1.0)

    @property
    def has_interval(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None

    def to_dict(self) -> dict[str, Any]:
        """The metric as strict JSON (a NaN is ``None``), as ``report.json`` holds it."""
        return {"value": json_number(self.value), "ci_low": json_number(self.ci_low), "ci_high": json_number(self.ci_high),
                "n": self.n, "unscored": dict(self.unscored), "incomplete": self.incomplete,
                **({"counted_wrong": dict(self.counted_wrong)} if self.counted_wrong else {})}


def _finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


#: The range of a metric by the estimator its record names (``method``): a paired difference of two shares
#: lies in [-1, 1]; every other estimate opct writes is a share or an area in [0, 1].
RANGE_OF_METHOD: dict[str, tuple[float, float]] = {"paired-cluster-bootstrap": (-1.0, 1.0)}


def declared_range(raw: dict[str, Any]) -> tuple[float, float]:
    """The range a metric record declares: its own ``range`` ``[low, high]`` if it has one, else its estimator's
    (:data:`RANGE_OF_METHOD`), else [0, 1]."""
    own = raw.get("range")
    if isinstance(own, list | tuple) and len(own) == 2 and all(_finite(x) is not None for x in own):
        return float(own[0]), float(own[1])
    return RANGE_OF_METHOD.get(str(raw.get("method")), (0.0, 1.0))


def parse_metric(raw: Any, incomplete: bool = False) -> Metric | None:
    """A metric from a ``{value, ci_low, ci_high, n, unscored, counted_wrong}`` record or a bare number; None
    when not finite."""
    if isinstance(raw, dict):
        value = _finite(raw.get("value"))
        if value is None:
            return None
        lo, hi = _finite(raw.get("ci_low")), _finite(raw.get("ci_high"))
        if lo is None or hi is None:
            lo = hi = None
        n = raw.get("n")
        unscored = raw.get("unscored") if isinstance(raw.get("unscored"), dict) else {}
        wrong = raw.get("counted_wrong") if isinstance(raw.get("counted_wrong"), dict) else {}
        return Metric(value, lo, hi, int(n) if isinstance(n, int | float) and not isinstance(n, bool) else None,
                      {str(k): int(v) for k, v in unscored.items() if v}, incomplete,
                      {str(k): int(v) for k, v in wrong.items() if v}, declared_range(raw))
    value = _finite(raw)
    return Metric(value, incomplete=incomplete) if value is not None else None


#: Slack for a value on its own interval's bound, written through JSON's decimal floats.
_TOLERANCE = 1e-9


def metric_problem(metric: Metric | None, n_records: int | None) -> str | None:
    """Why ``metric`` cannot be a measurement, or None: every eval and attack metric lies in the range it
    declares (:func:`declared_range`: a share or an area in [0, 1], a signed difference in [-1, 1]), inside its
    own interval, and counts at most the eval's ``n_records`` records."""
    if metric is None:
        return None
    low, high = metric.bounds

    def inside(x: float) -> bool:
        return low - _TOLERANCE <= x <= high + _TOLERANCE

    if not inside(metric.value):
        return f"value {metric.value:g} outside [{low:g}, {high:g}]"
    if metric.has_interval:
        lo, hi = float(metric.ci_low or 0.0), float(metric.ci_high or 0.0)
        if not (inside(lo) and inside(hi)):
            return f"interval [{lo:g}, {hi:g}] outside [{low:g}, {high:g}]"
        if not lo - _TOLERANCE <= metric.value <= hi + _TOLERANCE:
            return f"value {metric.value:g} outside its own interval [{lo:g}, {hi:g}]"
    if metric.n is not None and (metric.n < 0 or (n_records is not None and metric.n > n_records)):
        return f"n={metric.n} does not fit the {n_records} record(s) results.json counts"
    return None

