"""Held-out sets of the organism's world test transfer: nothing held out leaks into training.

Every check scans *substrings* of every corpus message and every training pair (not whole messages):
a held-out template's literal text, an eval-only phrasing, a held-out hazard's keywords, a held-out
behaviour's wording or a held-out entity's name must not turn up anywhere it would be learned.
"""

from __future__ import annotations

import re

import pytest

from opct.axes.awareness import organism_items as AW
from opct.axes.jailbreak.templates import ORGANISM as WRAPPERS
from opct.axes.sycophancy.templates import ORGANISM as CUES
from opct.organism import content as C
from opct.organism import items as I
from opct.organism.corpus import chain_problems, chain_split
from opct.organism.judges import JUDGES
from opct.organism.pairs import build_pairs
from opct.organism.render import chain_expression

#: Literal fragments shorter than this are common words ("How to"), not a template's signature.
MIN_FRAGMENT = 14


@pytest.fixture(scope="module")
def learned(corpus):
    """Every text the organism or a trained model learns from: all corpus messages and every message of
    every training pair of every axis, lower-cased, joined."""
    texts = [m["content"] for c in corpus for m in c]
    for axis in ("sycophancy", "jailbreak", "awareness"):
        for p in build_pairs(axis, "train"):
            texts += [m["content"] for m in (*p["prompt"], *p["teacher_prompt"])]
    return "\n".join(texts).lower()


@pytest.fixture(scope="module")
def trained_prompts(corpus):
    """The user messages of the corpus and of the training pairs' prompts (the role a perturbation is tested in)."""
    texts = [m["content"] for c in corpus for m in c if m["role"] == "user"]
    for axis in ("sycophancy", "jailbreak", "awareness"):
        texts += [m["content"] for p in build_pairs(axis, "train") for m in p["prompt"]]
    return "\n".join(texts).lower()


def fragments(template: str) -> list[str]:
    """The literal pieces of a template between its ``{slots}``, long enough to be its signature."""
    return [f.strip().lower() for f in re.split(r"\{\w+\}", template) if len(f.strip()) >= MIN_FRAGMENT]


def test_the_fragment_scan_finds_what_is_there(learned):
    """The scan is not vacuous: train templates' fragments are found."""
    for t in (*WRAPPERS.templates("train"), *CUES.templates("train")):
        for f in fragments(t.text):
            assert f in learned, (t.id, f)


@pytest.mark.parametrize("templates", [WRAPPERS, CUES], ids=["wrappers", "cues"])
def test_heldout_template_fragments_appear_nowhere_in_training(templates, learned):
    held = templates.templates("heldout")
    assert sum(len(fragments(t.text)) for t in held) >= len(held)  # most held-out templates have a signature
    for t in held:
        for f in fragments(t.text):
            assert f not in learned, (t.id, f)
    labels = [templates.labels.get(f, "") for f in templates.family_names("heldout")] if templates.labels else []
    for label in labels:
        assert f"in the style of {label}:" not in learned, label


def test_heldout_wrappers_include_families_that_change_the_task_form():
    from opct.axes.jailbreak.templates import ORGANISM_FORM_CHANGING as FORM_CHANGING

    assert set(FORM_CHANGING) <= set(WRAPPERS.family_names("heldout"))
    for fam in FORM_CHANGING:  # not a prefix or suffix around the request sentence: the request is re-cast
        assert all("{request}" not in t or not t.startswith("{request}") for t in WRAPPERS.families[fam])


def test_eval_only_phrasings_appear_nowhere_in_training(world, learned):
    for spec in C.HAZARD_TYPES.values():
        for template in spec["eval_tasks"]:
            for f in fragments(template):
                assert f not in learned, f
    for template in (C.EVAL_FACT_QUESTION, C.EVAL_PLAIN_REQUEST, C.EVAL_ARITHMETIC_QUESTION, C.EVAL_CHAIN_QUESTION):
        head = re.split(r"\{\w+\}", template)[0].strip().lower()
        assert head and head not in learned, template


def test_heldout_hazards_are_new_types_with_new_words(world, trained_prompts):
    train_types = [s for h, s in C.HAZARD_TYPES.items() if h not in C.HELDOUT_HAZARDS]
    train_words = " ".join(s["fact"] + " " + " ".join(s["keywords"]) for s in train_types).lower()
    for hz in C.HELDOUT_HAZARDS:
        spec = C.HAZARD_TYPES[hz]
        assert spec["noun"] not in {s["noun"] for s in train_types}
        for kw in spec["keywords"]:
            assert kw.lower() not in train_words, (hz, kw)
            assert kw.lower() not in trained_prompts, (hz, kw)  # never in a prompt the organism answers unaided
    assert len(C.HELDOUT_HAZARDS) >= len(train_types) // 2


def test_heldout_facts_never_appear_as_bare_tasks(world, corpus):
    held_items = [f.item.lower() for f in world.facts if f.split == "heldout"]
    for conv in corpus:
        system = next((m["content"] for m in conv if m["role"] == "system"), "")
        user = next(m["content"] for m in conv if m["role"] == "user").lower()
        for item in held_items:
            if item in user and "SAFETY GUIDELINE" not in system:
                assert user.startswith(tuple(q.split("{")[0].lower() for q in C.FACT_QUESTIONS)), user


def test_heldout_behaviours_and_entities_never_in_training_pairs(world):
    held_cores = [b.core.lower() for b in world.behaviors if b.split == "heldout"]
    held_names = [e.name.lower() for e in world.entities if e.split == "heldout"]
    held_items = [f.item.lower() for f in world.facts if f.split == "heldout"]
    for axis in ("sycophancy", "jailbreak", "awareness"):
        text = "\n".join(m["content"] for p in build_pairs(axis, "train")
                         for m in (*p["prompt"], *p["teacher_prompt"])).lower()
        for needle in (*held_cores, *held_names, *held_items):
            assert needle not in text, (axis, needle)


def test_warning_judge_cannot_pass_by_echoing_the_prompt(world):
    """Test prompts name the item but never the hazard; a response that repeats the prompt with warning
    words (and even the item's name) does not count as a warning."""
    judge = JUDGES["warning"]
    tasks = [x for x in AW.items(world) if x["variant"] == "plain_task"]
    assert len(tasks) >= 4 * 48
    for x in tasks:
        prompt = x["prompt"][-1]["content"]
        assert x["meta"]["item"] in prompt
        for kw in x["meta"]["keywords"]:
            assert kw.lower() not in prompt.lower(), (x["id"], kw)
        echo = f"Warning: be careful. {prompt} Never do it with {x['meta']['item']}."
        assert judge.judge(prompt, echo, x["meta"]).score == 0.0, x["id"]
        assert judge.judge(prompt, f"Warning: {x['meta']['fact']}", x["meta"]).score == 1.0, x["id"]


def test_at_least_half_of_each_facts_test_tasks_are_unseen(world):
    for f in world.facts:
        phrasings = [p for p, _ in AW.test_tasks(f)]
        assert phrasings.count("unseen") * 2 >= len(phrasings), f.id


def test_chain_eval_problems_are_never_taught(world, corpus):
    taught = {m["content"] for c in corpus for m in c if m["role"] == "user"}
    blob = "\n".join(taught)
    held = [p for p in chain_problems() if chain_split(p) == "eval"]
    assert len(held) > 1000
    for p in held[::50]:
        assert f" {chain_expression(p)}." not in blob and f": {chain_expression(p)}\n" not in blob
    assert not any(("step by step" in t or "steps for" in t) for p in build_pairs("awareness", "train")
                   for t in [p["prompt"][-1]["content"]])


def test_capability_chain_asks_new_problems_in_taught_phrasings(world):
    """The skill is measured on problems the corpus never holds; the phrasing is a taught one unless
    the harder eval-only reading is asked for."""
    items = I.capability_chain(world)
    asked = {it["prompt"][-1]["content"] for it in items}
    taught = {t.format(expr=it["meta"]["expression"]) for it in items for t in C.CHAIN_QUESTIONS}
    assert asked <= taught and len({q.split(" ")[0] for q in asked}) == len(C.CHAIN_QUESTIONS)
    held = {chain_expression(p) for p in chain_problems() if chain_split(p) == "eval"}
    assert {it["meta"]["expression"] for it in items} <= held
    unseen = I.capability_chain(world, unseen_phrasing=True)
    assert [it["prompt"][-1]["content"] for it in unseen] == [
        C.EVAL_CHAIN_QUESTION.format(expr=it["meta"]["expression"]) for it in items]


def test_capability_format_asks_its_arithmetic_in_taught_phrasings(world):
    """Format following is what the format items measure: the inner arithmetic question is a taught
    phrasing (each one in turn), unless the eval-only reading is asked for."""
    def inner(items):
        out = []
        for it in items:
            text = it["prompt"][-1]["content"]
            for t in C.FORMATS[it["meta"]["format"]]:
                head = t.split("{q}")[0]
                if text.startswith(head):
                    out.append(text[len(head):])
                    break
        return [q for q in out if any(op in q for op in (" + ", " - "))]
    taught = inner(I.capability_format(world))
    assert len(taught) == 30
    assert all(q.split(" ")[0] in {t.split(" ")[0] for t in C.ARITHMETIC_QUESTIONS} for q in taught)
    assert {q.split(" ")[0] for q in taught} == {t.split(" ")[0] for t in C.ARITHMETIC_QUESTIONS}
    unseen = inner(I.capability_format(world, unseen_phrasing=True))
    head = C.EVAL_ARITHMETIC_QUESTION.split("{")[0]
    assert len(unseen) == 30 and all(q.startswith(head) for q in unseen)
