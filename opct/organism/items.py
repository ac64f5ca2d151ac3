"""Evaluation items of the organism's world, with exact ground truth in ``meta``.

Every builder returns a list of ``{"id", "eval", "variant", "split", "prompt", "meta"}`` dicts,
deterministic in the world's seed; ``prompt`` is a chat message list. The capability items live
here; each safety axis builds its own items from the world in ``opct/axes/<axis>/organism.py`` with
:func:`make_item` and :func:`item_rng`.
"""

from __future__ import annotations

import random
from typing import Any

from opct.evals.contract import Unit
from opct.organism import content as C
from opct.organism import render as R
from opct.organism.corpus import arithmetic_problems, chain_problems, chain_split
from opct.organism.world import World

Item = dict[str, Any]
#: Answers of the shipped organism are short: every eval item is answered within this many new tokens.
#: ``opct organism check`` generates this many, and the demo's experiments ask for as many.
MAX_NEW_TOKENS = 48
#: The most new tokens an organism eval task gives an answer, whatever its generation settings ask: enough for
#: the longest response of any level of the response-diversity knob (69 tokens at ``w16-long``), so an eval
#: that asks for up to this many gets them (the mechanism study asks for 96). It was ``MAX_NEW_TOKENS`` until
#: 2026-11-29, which silently cut that study's evals at 48 (docs/mechanism.md, "A deviation found after the results").
EVAL_TOKEN_CAP = 96


def make_item(eval_name: str, item_id: str, variant: str, split: str, prompt: list[dict], meta: dict) -> Item:
    """One eval item; ``meta`` starts with its ``split``."""
    return {"id": item_id, "eval": eval_name, "variant": variant, "split": split, "prompt": prompt,
            "meta": {"split": split, **meta}}


def item_rng(world: World, name: str) -> random.Random:
    """The random generator of the items called ``name`` (fixed per world seed)."""
    return random.Random(f"opct-organism-items-{world.seed}-{name}")


def mc_question(world: World, entity_index: int, attr: str, eval_phrasing: bool = True) -> tuple[str, dict]:
    """A multiple-choice question about one fact, with options fixed per (seed, entity, attribute)."""
    ent = world.entities[entity_index]
    spec = C.ATTRIBUTES[attr]
    rng = item_rng(world, f"mc-{ent.id}-{attr}")
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
            items.append(make_item("capability_mc", f"mc-{ent.id}-{attr}", "clean", "eval", [R.user(q)], meta))
    return items


def _phrasing(taught: list[str], eval_only: str, k: int, unseen: bool) -> str:
    """The template of a capability item's ``k``-th question: the taught ones in turn, or the eval-only one."""
    return eval_only if unseen else taught[k % len(taught)]


def capability_arithmetic(world: World, n: int = 150, unseen_phrasing: bool = False) -> list[Item]:
    """``n`` arithmetic problems, each in one of the taught phrasings (in turn), as
    :func:`capability_mc`: the skill is what is measured. ``unseen_phrasing`` asks every problem in an
    eval-only phrasing instead (a harder reading: a first v2 build answered 100% of the problems in
    taught phrasings greedily, 94% in the eval-only one)."""
    rng = item_rng(world, "arithmetic")
    items = []
    for k, (a, op, b) in enumerate(rng.sample(arithmetic_problems(), n)):
        _, value = R.arithmetic_answer(a, op, b)
        q = _phrasing(C.ARITHMETIC_QUESTIONS, C.EVAL_ARITHMETIC_QUESTION, k, unseen_phrasing).format(a=a, op=op, b=b)
        items.append(make_item("capability_arithmetic", f"arith-{a}{op}{b}", "clean", "eval", [R.user(q)],
                           {"answer": value, "expression": f"{a} {op} {b}"}))
    return items


def capability_chain(world: World, n: int = 150, unseen_phrasing: bool = False) -> list[Item]:
    """``n`` worked multi-step problems (three additions or subtractions of one-digit numbers), from the
    fixed fifth of chain problems the corpus never contains, each in one of the taught phrasings (in
    turn): the problem is new, so the skill is what is measured. The answer is several sentences long;
    only the stated result is scored, exactly. ``unseen_phrasing`` asks in an eval-only phrasing
    instead, which the 2M-parameter organism does not carry over to (a first v2 build: 97% of new
    problems in taught phrasings, 0% worked through in the eval-only one)."""
    rng = item_rng(world, "chain")
    items = []
    for k, p in enumerate(rng.sample([p for p in chain_problems() if chain_split(p) == "eval"], n)):
        expr = R.chain_expression(p)
        worked, value = R.chain_answer(p)
        q = _phrasing(C.CHAIN_QUESTIONS, C.EVAL_CHAIN_QUESTION, k, unseen_phrasing).format(expr=expr)
        items.append(make_item("capability_chain", "chain-" + expr.replace(" ", ""), "clean", "eval", [R.user(q)],
                               {"answer": value, "expression": expr, "worked": worked}))
    return items


def capability_format(world: World, per_format: int = 40, unseen_phrasing: bool = False) -> list[Item]:
    """Format-following instructions (one word, a required opening, a required closing word) on open and
    arithmetic questions. The inner arithmetic question is in a taught phrasing (in turn), as
    :func:`capability_arithmetic`: following the format is what is measured. ``unseen_phrasing`` asks it
    in the eval-only phrasing instead (a first v2 gpt2 build: 1 of 10 "begin with 'Answer:'" items
    followed in the eval-only phrasing, 10 of 10 in taught phrasings)."""
    rng = item_rng(world, "format")
    probs = arithmetic_problems()
    items = []
    for fmt, templates in C.FORMATS.items():
        for k in range(per_format):
            if k % 4 == 3:
                a, op, b = rng.choice(probs)
                template = _phrasing(C.ARITHMETIC_QUESTIONS, C.EVAL_ARITHMETIC_QUESTION, k // 4, unseen_phrasing)
                q = template.format(a=a, op=op, b=b)
            else:
                ent = rng.choice(world.entities)
                q = C.ATTRIBUTES[rng.choice(list(C.ATTRIBUTES))]["questions"][0].format(name=ent.name)
            prompt = templates[k % len(templates)].format(q=q)
            items.append(make_item("capability_format", f"format-{fmt}-{k:03d}", fmt, "eval", [R.user(prompt)],
                               {"format": fmt}))
    return items


def bare_request(core: str) -> str:
    """The canonical bare request for a behaviour (the jailbreak teacher prompt)."""
    return R.plain_request(C.PLAIN_REQUESTS[0], core)


def item_unit(item: Item, item_id: str, variant: str, meta: dict | None = None) -> Unit:
    """The eval unit of one item: its prompt and split, ``meta`` (default the item's own)."""
    return Unit(item_id, variant, item["prompt"], item["split"], dict(meta if meta is not None else item["meta"]))
