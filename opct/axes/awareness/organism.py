"""Safety awareness in the organism's world: tasks that involve a hazard the user does not mention.

Facts of a split are asked about directly (does the organism know them), as plain tasks (does it
warn unprompted: the measured behaviour) and as tasks with the fact in a system prompt (the teacher
prompt: it should warn there).
"""

from __future__ import annotations

from typing import Any

from opct.axes.base import make_pair
from opct.evals.task import Unit, seeded_sample
from opct.organism import content as C
from opct.organism import render as R
from opct.organism.items import Item, item_unit, make_item
from opct.organism.world import World

#: Plain tasks per eval task (a seeded sample), with the reference items of their facts.
EVAL_TASKS = 160
#: Variants whose pass rates are references beside the awareness metrics: knows the fact, warns when told.
REFERENCES = {"knows": "knows_fact", "task_with_fact": "warns_with_fact"}


def items(world: World) -> list[Item]:
    """Per fact: the direct question, each plain task, and each task with the fact in a system prompt."""
    out = []
    for f in world.facts:
        meta = {"fact_id": f.id, "fact": f.fact, "item": f.item, "hazard": f.hazard, "keywords": list(f.keywords)}
        out.append(make_item("awareness", f"{f.id}-knows", "knows", f.split,
                             [R.user(C.FACT_QUESTIONS[0].format(item=f.item))], meta))
        out.append(make_item("awareness", f"{f.id}-knows-unseen", "knows_unseen_phrasing", f.split,
                             [R.user(C.EVAL_FACT_QUESTION.format(item=f.item))], meta))
        spec = C.HAZARD_TYPES[f.hazard]
        for k, template in enumerate((*spec["tasks"], spec["eval_task"])):
            task = R.task_prompt(template, f)
            out.append(make_item("awareness", f"{f.id}-task-{k}", "plain_task", f.split, [R.user(task)], meta))
            out.append(make_item("awareness", f"{f.id}-task-{k}-fact", "task_with_fact", f.split,
                                 [R.system(R.safety_system_prompt(f)), R.user(task)], meta))
    return out


def pairs(world: World, split: str) -> list[dict[str, Any]]:
    """Pairs: prompt = a plain task, teacher_prompt = the task with the safety fact in a system message
    (held-out facts also with their eval-only task)."""
    out = []
    for f in world.facts:
        if f.split != split:
            continue
        spec = C.HAZARD_TYPES[f.hazard]
        tasks = spec["tasks"] if split == "train" else [*spec["tasks"], spec["eval_task"]]
        for k, template in enumerate(tasks):
            task = R.task_prompt(template, f)
            meta = {"fact_id": f.id, "fact": f.fact, "item": f.item, "hazard": f.hazard,
                    "keywords": list(f.keywords), "task": k, "split": split}
            out.append(make_pair(f"aw-{f.id}-task-{k}", "awareness", [R.user(task)],
                                 [R.system(R.safety_system_prompt(f)), R.user(task)], meta))
    return out


def units(world: World, split: str, size: int | None) -> list[Unit]:
    """A seeded sample of the split's plain tasks, then the reference items of their facts."""
    of_split = [x for x in items(world) if x["split"] == split]
    tasks = seeded_sample([x for x in of_split if x["variant"] == "plain_task"], size, f"organism-eval-aw-{split}")
    facts = {x["meta"]["fact_id"] for x in tasks}
    refs = [x for x in of_split if x["variant"] in REFERENCES and x["meta"]["fact_id"] in facts]
    return [item_unit(x, x["id"], x["variant"]) for x in tasks + refs]
