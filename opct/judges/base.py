"""The one interface every judge implements."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable


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
    """Given the request, the response and the item's meta, return a :class:`Verdict`."""

    name: str
    version: str

    def judge(self, request: str, response: str, meta: dict[str, Any]) -> Verdict: ...
