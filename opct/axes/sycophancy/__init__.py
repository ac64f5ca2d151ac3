"""Sycophancy: does a user's stated (wrong) opinion pull the model's multiple-choice answer?

``templates`` (cue sets for real models and the organism, one placeholder scheme, named splits),
``data`` (multiple-choice items, loader, real-data pairs), ``organism`` (the organism's questions,
pairs and eval units), ``tasks`` (the one eval task), ``metrics`` (sycophancy rate, switches,
consistency, accuracy gap). Real data: ``real.sycophancy_mc``, a multiple-choice file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from opct.axes import Axis, FigureSpec, TemplateSet
from opct.axes.sycophancy.data import build_pairs, eval_units, load_mc_items
from opct.axes.sycophancy.metrics import sycophancy_metrics, sycophancy_metrics_by
from opct.axes.sycophancy.templates import ORGANISM, REAL, render_cue
from opct.datasets.multiple_choice import MCQuestion
from opct.evals.task import EvalTask, TaskContext, seeded_sample
from opct.organism.world import world

HOWTO = (
    "Sycophancy rate: the share of biased prompts on which the model gives the answer the prompt suggests. "
    "Hatched bars use the cue families seen in training, solid bars the held-out families. A method that only "
    "learned its training cues improves on the hatched bars but not on the solid ones."
)


class SycophancyAxis(Axis):
    """Biased multiple-choice prompts vs the clean question."""

    name = "sycophancy"
    title = "Sycophancy"
    howto = HOWTO
    unit_key = "item_id"
    templates: ClassVar[Mapping[str, TemplateSet]] = {"organism": ORGANISM, "real": REAL}
    judges: ClassVar[Mapping[str, tuple[str, ...]]] = {"organism": ("mc",)}
    real_data: ClassVar[Mapping[str, str]] = {"sycophancy_mc": "multiple-choice file (JSONL/CSV) to build biased prompts from"}

    def organism_pairs(self, split: str, seed: int | None = None) -> list[dict[str, Any]]:
        from opct.axes.sycophancy.organism import pairs

        return pairs(world(seed), split)

    def real_pairs(self, paths: Mapping[str, str], split: str, limit: int | None = None) -> list[dict[str, Any]]:
        return build_pairs(seeded_sample(load_mc_items(paths["sycophancy_mc"]), limit, 0), split=split)

    def organism_tasks(self, ctx: TaskContext) -> list[EvalTask]:
        from opct.axes.sycophancy.organism import EVAL_BIASED, units
        from opct.axes.sycophancy.tasks import judge_reader, sycophancy_task
        from opct.organism.items import MAX_NEW_TOKENS

        templates = ctx.template_set(self).templates(ctx.split)
        return [sycophancy_task(
            units(ctx.world(), ctx.split, ctx.cap(EVAL_BIASED), templates), judge_reader(ctx.make_judge("mc")),
            breakdown=("sycophancy_rate",), max_new_tokens=MAX_NEW_TOKENS,
            description=f"organism sycophancy, {ctx.split} cue families",
        )]

    def real_tasks(self, ctx: TaskContext) -> list[EvalTask]:
        from opct.axes.sycophancy.tasks import sycophancy_task, units_from_pairs

        if not ctx.real.get("sycophancy_mc"):
            return []
        items = seeded_sample(load_mc_items(ctx.real["sycophancy_mc"]), ctx.limit, 0)
        pairs = build_pairs(items, split=ctx.split, template_list=ctx.template_set(self).templates())
        return [sycophancy_task(units_from_pairs(pairs))]

    def report_columns(self, exp: Any) -> list[Any]:
        from opct.report.columns import eval_column
        from opct.report.paired import judged, record_values

        def suggested(r: Mapping[str, Any]) -> float | None:  # a biased sample with a parsed answer
            return None if r.get("variant") == "clean" or r.get("parsed") is None else judged(r, "suggested")

        paired = record_values(self.name, suggested, lambda r: str(r["item_id"]))
        return [eval_column(self.name, "Sycophancy rate (held-out)", "sycophancy_rate", better="lower", paired=paired)]

    def report_figures(self, exp: Any) -> list[FigureSpec]:
        from opct.report.figures import AxisSpec, plot_axis

        spec = AxisSpec(self.name, "sycophancy_rate", "sycophancy rate", "sycophancy rate", True, "lower")
        return [(f"axis_{self.name}", lambda: plot_axis(exp, spec))]


AXIS = SycophancyAxis()

__all__ = [
    "AXIS",
    "ORGANISM",
    "REAL",
    "MCQuestion",
    "SycophancyAxis",
    "build_pairs",
    "eval_units",
    "load_mc_items",
    "render_cue",
    "sycophancy_metrics",
    "sycophancy_metrics_by",
]
