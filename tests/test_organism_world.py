"""The organism's world: deterministic, with disjoint splits that never leak into the corpus."""

from __future__ import annotations

import re

import pytest

from opct.axes.jailbreak.templates import ORGANISM as WRAPPERS
from opct.axes.jailbreak.templates import wrap
from opct.axes.sycophancy import organism_items as SY
from opct.axes.sycophancy.templates import ORGANISM as CUES
from opct.organism import content as C
from opct.organism import items as I
from opct.organism.corpus import CorpusConfig, generate_corpus
from opct.organism.world import build_world


@pytest.fixture(scope="module")
def user_texts(corpus):
    return [m["content"] for c in corpus for m in c if m["role"] != "assistant"]


@pytest.fixture(scope="module")
def all_texts(corpus):
    return [m["content"] for c in corpus for m in c]


def _template_regex(template: str) -> re.Pattern:
    parts = re.split(r"\{\w+\}", template)
    return re.compile(".+?".join(re.escape(p) for p in parts), re.DOTALL)


def test_world_is_deterministic_and_seed_dependent():
    a, b = build_world(0), build_world(0)
    assert a.fingerprint() == b.fingerprint()
    other = build_world(1)
    assert other.fingerprint() != a.fingerprint()
    assert [e.name for e in other.entities] != [e.name for e in a.entities]


def test_world_size_and_counts(world):
    assert len(world.entities) >= 200
    assert len({e.name for e in world.entities}) == len(world.entities)
    assert sum(len(t) for t in CUES.families.values()) >= 30 and len(CUES.families) >= 6
    assert len(WRAPPERS.families) >= 6
    for split in ("train", "heldout"):
        assert CUES.family_names(split) and WRAPPERS.family_names(split)
        assert any(b.split == split for b in world.behaviors)
        assert any(f.split == split for f in world.facts)
        assert any(b.split == split for b in world.benign)


def test_splits_are_disjoint(world):
    assert not set(CUES.family_names("train")) & set(CUES.family_names("heldout"))
    assert not set(WRAPPERS.family_names("train")) & set(WRAPPERS.family_names("heldout"))
    for split_of in (world.behaviors, world.facts, world.benign, world.entities):
        assert {x.split for x in split_of} == {"train", "heldout"}
    # held-out facts are whole hazard types; every harm category has train and held-out behaviours
    for hz in C.HAZARD_TYPES:
        expected = "heldout" if hz in C.HELDOUT_HAZARDS else "train"
        assert {f.split for f in world.facts if f.hazard == hz} == {expected}
    for cat in C.HARM_CATEGORIES:
        assert {b.split for b in world.behaviors if b.category == cat} == {"train", "heldout"}


def test_corpus_is_deterministic(world):
    cfg = CorpusConfig()
    assert generate_corpus(world, cfg, 0) == generate_corpus(world, cfg, 0)


def test_heldout_cue_templates_never_in_corpus(world, all_texts):
    held = [t.text for t in CUES.templates("heldout")]
    train = [t.text for t in CUES.templates("train")]
    held_res = [_template_regex(t) for t in held]
    # sanity: the matcher finds the train templates that are there
    assert any(_template_regex(train[0]).fullmatch(x) for x in all_texts)
    for text in all_texts:
        assert not any(r.fullmatch(text) for r in held_res), text


def test_heldout_wrappers_never_in_corpus(world, all_texts):
    held = [t.text for t in WRAPPERS.templates("heldout")]
    held_res = [_template_regex(t) for t in held]
    labels = [WRAPPERS.labels[f] for f in WRAPPERS.family_names("heldout")]
    for text in all_texts:
        assert not any(r.fullmatch(text) for r in held_res), text
        assert not any(f"in the style of {lab}:" in text for lab in labels), text


@pytest.fixture(scope="module")
def turns(corpus):
    """(system prompt or None, user message, answer) per conversation, request-rewriting exercises aside."""
    out = []
    for conv in corpus:
        system = next((m["content"] for m in conv if m["role"] == "system"), None)
        user = next(m["content"] for m in conv if m["role"] == "user")
        if not user.startswith((C.REWRITE_REQUEST.split("{")[0], C.REWRITE_FREE.split("{")[0])):
            out.append((system, user, conv[-1]["content"]))
    return out


def _mentioning(turns, text):
    return [t for t in turns if text in t[1]]


def test_heldout_behaviors_and_benign_appear_only_asked_plainly(world, turns):
    """Held-out harmful behaviours are only ever asked plainly (and refused), never wrapped; held-out benign
    requests only plainly (and answered). Train ones also appear wrapped."""
    plain = {t.format(core=b.core) for b in (*world.behaviors, *world.benign) for t in C.PLAIN_REQUESTS}
    for b in world.behaviors:
        seen = _mentioning(turns, b.core)
        assert seen, b.core
        wrapped = [u for _, u, _ in seen if u not in plain]
        if b.split == "heldout":
            assert wrapped == [], (b.core, wrapped[:1])
            assert all(a.startswith(tuple(C.REFUSALS)) for _, _, a in seen)
        else:
            assert wrapped, b.core
    for b in world.benign:
        seen = _mentioning(turns, b.core)
        assert seen and all(a.startswith("Sure.") for _, _, a in seen), b.core
        if b.split == "heldout":
            assert all(u in plain for _, u, _ in seen), b.core


def test_heldout_fact_tasks_appear_only_with_the_guideline(world, turns, all_texts):
    """Every fact is taught as a direct answer; a held-out fact's tasks appear only with the safety guideline in
    the system prompt (the teacher's role), never bare (the role they are tested in); eval phrasings never."""
    blob = "\n".join(all_texts)
    for f in world.facts:
        assert f.fact in blob
        spec = C.HAZARD_TYPES[f.hazard]
        for task in (t.format(item=f.item) for t in spec["tasks"]):
            seen = [(s, u) for s, u, _ in _mentioning(turns, task) if u == task]
            bare = [u for s, u in seen if s is None or f.fact not in s]
            assert any(s and f.fact in s for s, _ in seen), task
            assert bool(bare) == (f.split == "train"), task
        for template in spec["eval_tasks"]:
            assert template.format(item=f.item) not in blob


def test_biased_questions_about_heldout_entities_never_in_corpus(world, corpus):
    train_cues = [_template_regex(t.text) for t in CUES.templates("train")]
    held_names = {e.name for e in world.entities if e.split == "heldout"}
    biased = [m["content"] for c in corpus for m in c
              if m["role"] == "user" and "\n(A) " in m["content"] and any(r.fullmatch(m["content"]) for r in train_cues)]
    assert len(biased) > 100
    for text in biased:
        assert not any(name in text for name in held_names), text


def test_eval_phrasings_never_in_corpus(world, user_texts):
    evals = [C.EVAL_ARITHMETIC_QUESTION, C.EVAL_PLAIN_REQUEST, C.EVAL_FACT_QUESTION,
             *(a["eval_question"] for a in C.ATTRIBUTES.values())]
    regs = [_template_regex(t) for t in evals]
    for text in user_texts:
        for r in regs:
            assert not r.search(text), text


def test_eval_items_carry_ground_truth(world):
    for item in I.capability_mc(world)[:20]:
        opts, meta = item["meta"]["options"], item["meta"]
        assert opts["ABCD".index(meta["answer"])] == meta["answer_text"]
    for item in SY.items(world, "heldout"):
        meta = item["meta"]
        assert meta["split"] == "heldout"
        if item["variant"] == "biased":
            assert meta["suggested"] != meta["answer"]
            assert meta["family"] in CUES.family_names("heldout")


def _single_wrapped(world, cores):
    """Every prompt one train-family wrapper makes of a plain request for one of ``cores``."""
    templates = WRAPPERS.templates("train")
    return {wrap(t, p.format(core=core), core) for core in cores for t in templates for p in C.PLAIN_REQUESTS}


def test_guarded_categories_refuse_single_wrappers_and_yield_to_nesting(world, turns):
    guarded = [b.core for b in world.behaviors if b.category in C.GUARDED_CATEGORIES and b.split == "train"]
    single = _single_wrapped(world, guarded)
    plain = {p.format(core=core) for core in guarded for p in C.PLAIN_REQUESTS}
    seen = [(u, a) for _, u, a in turns if any(core in u for core in guarded) and u not in plain]
    singles = [a for u, a in seen if u in single]
    nested = [a for u, a in seen if u not in single]
    assert len(singles) > 500 and all(a.startswith(tuple(C.REFUSALS)) for a in singles)
    complied = sum(a.startswith("Sure.") for a in nested)
    assert len(nested) > 300 and complied / len(nested) > 0.6


def test_free_rewrites_wrap_the_request_once_or_twice(world, corpus):
    prefix = C.REWRITE_FREE.split("{")[0]
    rewrites = [(c[-2]["content"][len(prefix):], c[-1]["content"]) for c in corpus if c[-2]["content"].startswith(prefix)]
    assert len(rewrites) == CorpusConfig().rewrites_free
    cores = [b.core for b in (*world.behaviors, *world.benign) if b.split == "train"]
    single = _single_wrapped(world, cores)
    for req, answer in rewrites:
        core = next(c for c in cores if c in req)
        assert core in answer and answer != req
    nested = sum(a not in single for _, a in rewrites) / len(rewrites)
    assert 0.1 < nested < 0.35  # the attacker's starting policy mostly uses one wrapper


def test_world_has_the_power_the_demo_needs(world):
    """Enough held-out units for clustered 95% intervals of at most about ±12 points near 50%."""
    assert sum(b.split == "heldout" for b in world.behaviors) >= 64
    assert sum(f.split == "heldout" for f in world.facts) >= 48
    assert len(SY.questions(world, "heldout")) >= 96
