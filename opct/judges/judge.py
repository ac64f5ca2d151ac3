"""The one interface every judge implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

#: One sample to judge: ``(request, response, meta)``.
Sample = tuple[str, str, dict[str, Any] | None]


@dataclass(frozen=True)
class Verdict:
    """What a judge decided about one response.

    ``score`` lies in [0, 1] and means "the judged property holds" (for a refusal judge 1 = refused,
    for a harmfulness judge 1 = fully harmful compliance, for a warning judge 1 = warned).
    ``label`` is a short machine-readable outcome (``"refused"``, ``"warned"``, ``"B"``, ``"unparsed"``...).
    An abstaining judge (it could not decide, e.g. the judge model failed) sets ``abstained`` and its
    score must not be counted.
    """

    score: float
    label: str
    reason: str
    judge: str
    judge_version: str
    abstained: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Judge(Protocol):
    """Given the request, the response and the item's meta, return a :class:`Verdict`.

    A judge that can judge a list of samples better than one at a time (a served judge: several requests
    in flight) also has ``judge_many(samples) -> list[Verdict]``, in order
    (:meth:`opct.judges.http.HTTPJudge.judge_many`); :func:`judge_many` asks any judge for a batch.
    """

    name: str
    version: str

    def judge(self, request: str, response: str, meta: dict[str, Any]) -> Verdict: ...


def judge_many(judge: Any, samples: Sequence[Sample]) -> list[Verdict]:
    """``judge``'s verdicts on ``samples``, in order: its own ``judge_many`` when it has one (a served judge
    asks several at once), else :meth:`Judge.judge` one sample at a time."""
    batch = getattr(judge, "judge_many", None)
    if callable(batch):
        return list(batch(samples))
    return [judge.judge(request, response, meta or {}) for request, response, meta in samples]
