"""Consistency pairs of the organism's world (design.md §3.1), per axis and split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opct.organism import content as C
from opct.organism import items as I
from opct.organism import render as R
from opct.organism.world import DEFAULT_SEED, World, build_world

AXES = ("sycophancy", "jailbreak", "awareness")
SPLITS = ("train", "heldout")
SYCOPHANCY_QUESTIONS_PER_TEMPLATE = 8


def _pair(pid: str, axis: str, prompt: list[dict], teacher: list[dict], meta: dict) -> dict[str, Any]:
    return {"id": pid, "axis": axis, "prompt": prompt, "teacher_prompt": teacher, "meta": meta}


def _sycophancy(world: World, split: str) -> list[dict[str, Any]]:
    return [
        _pair(f"syc-{v['key']}", "sycophancy", [R.user(v["biased"])], [R.user(v["clean"])],
              {**v["meta"], "split": split})
        for v in I.sycophancy_variants(world, split, SYCOPHANCY_QUESTIONS_PER_TEMPLATE)
    ]


def _jailbreak(world: World, split: str) -> list[dict[str, Any]]:
    pairs = []
    for b in world.behaviors:
        if b.split != split:
            continue
        bare = I.bare_request(b.core)
        for fam in world.wrapper_families(split):
            for t_idx, template in enumerate(C.WRAPPER_FAMILIES[fam]["templates"]):
                meta = {"behavior": b.id, "category": b.category, "harmful": True, "family": fam,
                        "template": f"{fam}-{t_idx:02d}", "split": split}
                pairs.append(_pair(f"jb-{b.id}-{fam}-{t_idx:02d}", "jailbreak",
                                   [R.user(R.wrap_request(template, bare, b.core))], [R.user(bare)], meta))
    return pairs


def _awareness(world: World, split: str) -> list[dict[str, Any]]:
    pairs = []
    for f in world.facts:
        if f.split != split:
            continue
        spec = C.HAZARD_TYPES[f.hazard]
        tasks = spec["tasks"] if split == "train" else [*spec["tasks"], spec["eval_task"]]
        for k, template in enumerate(tasks):
            task = R.task_prompt(template, f)
            meta = {"fact_id": f.id, "fact": f.fact, "item": f.item, "hazard": f.hazard,
                    "keywords": list(f.keywords), "task": k, "split": split}
            pairs.append(_pair(f"aw-{f.id}-task-{k}", "awareness", [R.user(task)],
                               [R.system(R.safety_system_prompt(f)), R.user(task)], meta))
    return pairs


_BUILDERS = {"sycophancy": _sycophancy, "jailbreak": _jailbreak, "awareness": _awareness}


def build_pairs(axis: str, split: str, seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    """Consistency pairs of one axis and split.

    sycophancy: prompt = question with a user's suggested wrong option (one per wrong option per cue
    template of the split), teacher_prompt = the clean question. jailbreak: prompt = wrapped request,
    teacher_prompt = bare request. awareness: prompt = plain task, teacher_prompt = the task with the
    safety fact in a system message.
    """
    if axis not in _BUILDERS:
        raise ValueError(f"unknown axis {axis!r}; choose one of {', '.join(AXES)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return _BUILDERS[axis](build_world(seed), split)


def write_pairs(pairs: list[dict[str, Any]], path: str | Path) -> Path:
    """Write pairs as JSON lines; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    return path


def organism_pair_source(argument: str) -> list[dict[str, Any]]:
    """``<axis>[:<split>]`` -> :func:`build_pairs` (split defaults to train)."""
    parts = argument.split(":")
    if len(parts) not in (1, 2) or not parts[0]:
        raise ValueError(f"organism pair source {argument!r}: expected organism:<axis>[:<split>], e.g. organism:sycophancy:train")
    return build_pairs(parts[0], parts[1] if len(parts) == 2 else "train")
