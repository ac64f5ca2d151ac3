"""The organism's validation judge (registered as ``organism``; see :mod:`opct.training.validation`).

:func:`judge_behaviour`: whether an answer to a validation prompt does what the teacher would do on
the clean prompt, by its axis's validation judge (the organism's exact judges; each axis says what
counts, :attr:`opct.evals.axis_views.OrganismView.validation_judge`; none without the view). An empty or unreadable answer is unscored
(``None``), never good. The organism's capability probe is the capability axis's
(:mod:`opct.axes.capability.probe`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opct.evals.axis_registry import AXES
from opct.evals.axis_views import organism_view


def judge_behaviour(axis: str, metas: Sequence[dict[str, Any]], answers: Sequence[str]) -> list[bool | None]:
    """Good behaviour (True), not (False) or unscored (None) of each answer, by the axis's validation
    judge (:attr:`opct.evals.axis_views.OrganismView.validation_judge`); an empty answer, or an axis that is not
    registered, is unscored."""
    judge = organism_view(AXES.get(axis)).validation_judge if axis in AXES else None
    return [None if judge is None or not answer.strip() else judge(meta, answer)
            for meta, answer in zip(metas, answers, strict=True)]
