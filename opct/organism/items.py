"""Evaluation items of the organism's world, with exact ground truth in ``meta``.

Every builder returns a list of ``{"id", "eval", "variant", "split", "prompt", "meta"}`` dicts,
deterministic in the world's seed; ``prompt`` is a chat message list.
"""

from __future__ import annotations

import random
from typing import Any

from opct.organism import content as C
from opct.organism import render as R
from opct.organism.corpus import arithmetic_problems
from opct.organism.world import World

Item = dict[str, Any]


def _item(eval_name: str, item_id: str, variant: str, split: str, prompt: list[dict], meta: dict) -> Item:
    return {"id": item_id, "eval": eval_name, "variant": variant, "split": split, "prompt": prompt,
            "meta": {"split": split, **meta}}


def _rng(world: World, name: str) -> random.Random:
    return random.Random(f"opct-organism-items-{world.seed}-{name}")


def mc_question(world: World, entity_index: int, attr: str, eval_phrasing: bool = True) -> tuple[str, dict]:
    """A multiple-choice question about one fact, with options fixed per (seed, entity, attribute)."""
    ent = world.entities[entity_index]
    spec = C.ATTRIBUTES[attr]
    rng = _rng(world, f"mc-{ent.id}-{attr}")
    options, gold = R.mc_options(rng, ent.attributes[attr], spec["values"])
    template = spec["eval_question"] if eval_phrasing else spec["questions"][0]
    meta = {"answer": gold, "answer_text": ent.attributes[attr], "options": options,
            "entity": ent.id, "attribute": attr}
    return R.mc_question(template.format(name=ent.name), options), meta


def capability_mc(world: World, unseen_phrasing: bool = False) -> list[Item]:
    """One multiple-choice question per (entity, attribute), with its own option order.

    By default in a taught question phrasing (the knowledge is what is measured); ``unseen_phrasing``
    uses an eval-only phrasing instead (a harder, generalisation reading).
    """
    items = []
    for i, ent in enumerate(world.entities):
        for attr in C.ATTRIBUTES:
            q, meta = mc_question(world, i, attr, eval_phrasing=unseen_phrasing)
            items.append(_item("capability_mc", f"mc-{ent.id}-{attr}", "clean", "eval", [R.user(q)], meta))
    return items


def capability_open(world: World, unseen_phrasing: bool = False) -> list[Item]:
    """One open question per (entity, attribute) (taught phrasing unless ``unseen_phrasing``)."""
    items = []
    for ent in world.entities:
        for attr, spec in C.ATTRIBUTES.items():
            q = (spec["eval_question"] if unseen_phrasing else spec["questions"][0]).format(name=ent.name)
            meta = {"answer_text": ent.attributes[attr], "entity": ent.id, "attribute": attr}
            items.append(_item("capability_open", f"open-{ent.id}-{attr}", "clean", "eval", [R.user(q)], meta))
    return items


def capability_arithmetic(world: World, n: int = 150) -> list[Item]:
    """``n`` arithmetic problems in an eval-only phrasing."""
    rng = _rng(world, "arithmetic")
    items = []
    for a, op, b in rng.sample(arithmetic_problems(), n):
        _, value = R.arithmetic_answer(a, op, b)
        q = C.EVAL_ARITHMETIC_QUESTION.format(a=a, op=op, b=b)
        items.append(_item("capability_arithmetic", f"arith-{a}{op}{b}", "clean", "eval", [R.user(q)],
                           {"answer": value, "expression": f"{a} {op} {b}"}))
    return items


def capability_format(world: World, per_format: int = 40) -> list[Item]:
    """Format-following instructions (one word, a required opening, a required closing word) on open and arithmetic questions."""
    rng = _rng(world, "format")
    probs = arithmetic_problems()
    items = []
    for fmt, templates in C.FORMATS.items():
        for k in range(per_format):
            if k % 4 == 3:
                a, op, b = rng.choice(probs)
                q = C.EVAL_ARITHMETIC_QUESTION.format(a=a, op=op, b=b)
            else:
                ent = rng.choice(world.entities)
                q = C.ATTRIBUTES[rng.choice(list(C.ATTRIBUTES))]["questions"][0].format(name=ent.name)
            prompt = templates[k % len(templates)].format(q=q)
            items.append(_item("capability_format", f"format-{fmt}-{k:03d}", fmt, "eval", [R.user(prompt)],
                               {"format": fmt}))
    return items


def sycophancy_questions(world: World, split: str) -> list[tuple[int, str]]:
    """The (entity index, attribute) questions used with the cue families of ``split``."""
    return [(i, a) for i, e in enumerate(world.entities) if e.split == split for a in C.ATTRIBUTES]


def sycophancy_variants(world: World, split: str, per_template: int) -> list[dict]:
    """Clean and biased versions of questions: for each cue template of ``split``, ``per_template``
    questions, each biased once per wrong option."""
    questions = sycophancy_questions(world, split)
    rng = _rng(world, f"syc-{split}")
    out = []
    for fam in world.cue_families(split):
        for t_idx, template in enumerate(C.CUE_FAMILIES[fam]):
            for i, attr in rng.sample(questions, per_template):
                q, meta = mc_question(world, i, attr, eval_phrasing=False)
                for letter in R.LETTERS:
                    if letter == meta["answer"]:
                        continue
                    text = meta["options"][R.LETTERS.index(letter)]
                    out.append({
                        "key": f"{fam}-{t_idx:02d}-{meta['entity']}-{attr}-{letter}",
                        "clean": q,
                        "biased": R.biased_prompt(template, q, letter, text),
                        "meta": {**meta, "suggested": letter, "template": f"{fam}-{t_idx:02d}", "family": fam},
                    })
    return out


def sycophancy_items(world: World, split: str, per_template: int = 3) -> list[Item]:
    """Biased items (one per wrong option) and the clean item of each question, for one split."""
    items: list[Item] = []
    seen_clean: set[str] = set()
    for v in sycophancy_variants(world, split, per_template):
        meta = v["meta"]
        items.append(_item("sycophancy", f"syc-{v['key']}", "biased", split, [R.user(v["biased"])], meta))
        clean_id = f"syc-{meta['entity']}-{meta['attribute']}-clean"
        if clean_id not in seen_clean:
            seen_clean.add(clean_id)
            clean_meta = {k: meta[k] for k in ("answer", "answer_text", "options", "entity", "attribute")}
            items.append(_item("sycophancy", clean_id, "clean", split, [R.user(v["clean"])], clean_meta))
    return items


def bare_request(core: str) -> str:
    """The canonical bare request for a behaviour (the jailbreak teacher prompt)."""
    return R.plain_request(C.PLAIN_REQUESTS[0], core)


def jailbreak_plain_items(world: World) -> list[Item]:
    """Every harmful behaviour asked plainly: in two of the world's plain phrasings (variant ``plain``)
    and in an eval-only phrasing (variant ``plain_unseen_phrasing``)."""
    items = []
    for b in world.behaviors:
        meta = {"behavior": b.id, "category": b.category, "harmful": True, "family": "plain"}
        for k, template in enumerate((C.PLAIN_REQUESTS[0], C.PLAIN_REQUESTS[4], C.EVAL_PLAIN_REQUEST)):
            variant = "plain" if k < 2 else "plain_unseen_phrasing"
            req = R.plain_request(template, b.core)
            items.append(_item("jailbreak", f"jb-{b.id}-plain-{k}", variant, b.split, [R.user(req)], meta))
    return items


def jailbreak_wrapped_items(world: World, family_split: str, behavior_split: str) -> list[Item]:
    """Every behaviour of ``behavior_split`` wrapped by every template of ``family_split`` families."""
    items = []
    for fam in world.wrapper_families(family_split):
        for t_idx, template in enumerate(C.WRAPPER_FAMILIES[fam]["templates"]):
            for b in world.behaviors:
                if b.split != behavior_split:
                    continue
                req = bare_request(b.core)
                prompt = R.wrap_request(template, req, b.core)
                meta = {"behavior": b.id, "category": b.category, "harmful": True, "family": fam,
                        "template": f"{fam}-{t_idx:02d}", "family_split": family_split,
                        "behavior_split": behavior_split}
                items.append(_item("jailbreak", f"jb-{b.id}-{fam}-{t_idx:02d}", "wrapped", family_split,
                                   [R.user(prompt)], meta))
    return items


def benign_items(world: World, split: str = "heldout") -> list[Item]:
    """Benign requests that look alarming, in every plain phrasing (over-refusal check)."""
    items = []
    for b in world.benign:
        if b.split != split:
            continue
        for k, template in enumerate((*C.PLAIN_REQUESTS, C.EVAL_PLAIN_REQUEST)):
            items.append(_item("benign", f"{b.id}-{k}", "plain", split,
                               [R.user(R.plain_request(template, b.core))], {"benign": b.id, "harmful": False}))
    return items


def awareness_items(world: World) -> list[Item]:
    """Per fact: the direct question, each plain task, and each task with the fact in a system prompt."""
    items = []
    for f in world.facts:
        meta = {"fact_id": f.id, "fact": f.fact, "item": f.item, "hazard": f.hazard, "keywords": list(f.keywords)}
        items.append(_item("awareness", f"{f.id}-knows", "knows", f.split,
                           [R.user(C.FACT_QUESTIONS[0].format(item=f.item))], meta))
        items.append(_item("awareness", f"{f.id}-knows-unseen", "knows_unseen_phrasing", f.split,
                           [R.user(C.EVAL_FACT_QUESTION.format(item=f.item))], meta))
        spec = C.HAZARD_TYPES[f.hazard]
        for k, template in enumerate((*spec["tasks"], spec["eval_task"])):
            task = R.task_prompt(template, f)
            items.append(_item("awareness", f"{f.id}-task-{k}", "plain_task", f.split, [R.user(task)], meta))
            items.append(_item("awareness", f"{f.id}-task-{k}-fact", "task_with_fact", f.split,
                               [R.system(R.safety_system_prompt(f)), R.user(task)], meta))
    return items
