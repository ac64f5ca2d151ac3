"""Capability: what consistency training should not cost. Registered in :data:`opct.axes.AXES` as
``capability`` (no perturbation, no pairs; its tasks do not depend on the split).

``tasks`` builds its evals: real benchmarks (multiple choice in the GPQA / MMLU style, MATH-500,
IFEval) and the organism's multiple-choice facts, arithmetic and format following, judged exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from opct.axes import FigureSpec, HookAxis
from opct.axes.capability.tasks import (
    ORGANISM_ITEMS,
    correct_of,
    organism_capability_tasks,
    real_capability_tasks,
)
from opct.evals.axis_views import Criterion, InspectView
from opct.evals.contract import EvalTask, TaskContext, Unit
from opct.evals.outcomes import ABSTAINED, ERROR
from opct.organism.criteria import exact, subsample
from opct.organism.world import world as organism_world

#: Capability evals in the order the report's table shows them, with their display names.
CAPABILITY_EVALS = {
    "capability_mc": "MC",
    "capability_arithmetic": "arithmetic",
    "capability_chain": "multi-step",
    "capability_format": "format",
    "gpqa": "GPQA-D",
    "math500": "MATH-500",
    "ifeval": "IFEval",
    "mmlu": "MMLU",
}
#: The headline metric of a capability eval (``accuracy`` unless named here).
CAPABILITY_METRIC = {"ifeval": "prompt_level_strict_acc"}

HOWTO = (
    "Capability before (base) and after consistency training, with 95% intervals. The labels over the "
    "trained methods give the change from base in percentage points; the paper reports SFT losing up to "
    "28 points on MATH-500 while OPCT largely does not regress."
)


def capability_evals(exp: Any) -> list[str]:
    """Capability evals with results, known ones in table order, then other ``capability_*`` evals."""
    present = set(exp.evals())
    known = [e for e in CAPABILITY_EVALS if e in present]
    return known + sorted(e for e in present if e.startswith("capability_") and e not in CAPABILITY_EVALS)


def capability_metric_key(eval_name: str) -> str:
    """The headline metric of ``eval_name``."""
    return CAPABILITY_METRIC.get(eval_name, "accuracy")


def capability_title(eval_name: str) -> str:
    """The display name of ``eval_name``."""
    return CAPABILITY_EVALS.get(eval_name, eval_name.removeprefix("capability_"))


class CapabilityAxis(HookAxis):
    """Accuracy on unperturbed tasks, before and after training."""

    name = "capability"
    title = "Capability"
    howto = HOWTO
    judges: ClassVar[Mapping[str, tuple[str, ...]]] = {"organism": ("mc", "arithmetic", "chain", "format")}
    real_data: ClassVar[Mapping[str, str]] = {
        "gpqa": "GPQA-Diamond: folder, JSONL/Parquet file or hub id[@revision]",
        "mmlu": "MMLU-style multiple-choice file",
        "math500": "MATH-500: folder, JSONL/Parquet file or hub id[@revision]",
        "ifeval": "IFEval: folder, JSONL/Parquet file or hub id[@revision]",
    }
    cli_options: ClassVar[Mapping[str, str]] = {"mmlu": "MMLU-style multiple choice file (capability)."}
    data_dir_layout: ClassVar[Mapping[str, str]] = {"gpqa": "gpqa-diamond", "math500": "math-500", "ifeval": "ifeval"}
    has_pairs = False
    per_split = False
    inspect = InspectView("item", ("correct",), "Every capability eval of the data source (opct's capability axis).",
                          evals={"capability_mc": "organism", "capability_arithmetic": "organism",
                                 "capability_chain": "organism", "capability_format": "organism",
                                 "gpqa": "real", "math500": "real", "ifeval": "real", "mmlu": "real"})
    #: Non-inferiority, not superiority: the margin is :data:`opct.report.pooled.NONINFERIORITY_MARGIN` (docs/metrics.md).
    paper_directions: ClassVar[Mapping[str, tuple[str, str]]] = {
        "cap:": ("no worse", "OPCT no worse than BCT within 2 pts: no capability cost")}

    def organism_tasks(self, ctx: TaskContext) -> list[EvalTask]:
        return organism_capability_tasks(organism_world(ctx.world_seed), ctx.cap(ORGANISM_ITEMS), ctx.make_judge)

    def real_tasks(self, ctx: TaskContext) -> list[EvalTask]:
        return real_capability_tasks(ctx.real, ctx.limit)

    def report_columns(self, exp: Any) -> list[Any]:
        from opct.report.columns import eval_column
        from opct.report.paired import record_values

        cols = []
        for name in capability_evals(exp):
            metric = capability_metric_key(name)
            title = f"{capability_title(name)} {'strict prompt acc.' if metric != 'accuracy' else 'accuracy'}"
            key = "prompt_strict" if metric != "accuracy" else "correct"

            def correct(r: Mapping[str, Any], key: str = key) -> float | None:
                return None if r.get("outcome") in (ABSTAINED, ERROR) else float(correct_of(r, key))

            paired = record_values(name, correct, lambda r: str(r["item_id"]))
            cols.append(eval_column(f"cap:{name}", title, metric, eval_name=name, paired=paired))
        return cols

    def report_figures(self, exp: Any) -> list[FigureSpec]:
        from opct.report.figures import plot_capability

        evals = capability_evals(exp)
        return [("capability", lambda: plot_capability(exp, evals, capability_metric_key, capability_title))]


    def inspect_values(self, record: Mapping[str, Any], unit: Unit) -> dict[str, float]:
        scores = record.get("scores") or {}
        return {"correct": float(bool(scores.get("correct", scores.get("prompt_strict"))))}

    def organism_criteria(self, world: Any, n: Callable[[int], int]) -> list[Criterion]:
        """The organism answers its capability items: the ground the consistency training must not lose."""
        from opct.organism import items as I

        return [
            Criterion("capability: multiple-choice facts", subsample(I.capability_mc(world), n(160), "mc"),
                      "mc", exact, ">=", 0.95),
            Criterion("capability: arithmetic", subsample(I.capability_arithmetic(world), n(100), "ar"),
                      "arithmetic", exact, ">=", 0.90),
            Criterion("capability: multi-step arithmetic", subsample(I.capability_chain(world), n(100), "ch"),
                      "chain", exact, ">=", 0.70),
            Criterion("capability: format following", subsample(I.capability_format(world), n(90), "fo"),
                      "format", exact, ">=", 0.90),
        ]


AXIS = CapabilityAxis()
