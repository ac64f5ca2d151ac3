"""The organism's training corpus: chat conversations generated from the world.

Only train-split templates (the train families of the axes' organism cue and wrapper sets),
behaviours and hazard tasks appear here; held-out ones never
appear in the role they are tested in. The organism must *know* what held-out items are, so they
appear in the roles a teacher prompt gives them: held-out facts (whole held-out hazard types) as
direct questions and as tasks with the safety guideline in the system prompt (never as bare tasks),
held-out behaviours asked plainly (refused; never wrapped), held-out benign requests asked plainly.
The eval-only phrasings (each hazard type's ``eval_tasks``, the ``EVAL_*`` questions) and a fixed
fifth of the worked-chain problems never appear.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from opct.evals.template_set import fill, keeps_request, wrap
from opct.organism import content as C
from opct.organism import render as R
from opct.organism.wordings import Responder, ResponseStyle
from opct.organism.world import CUES, WRAPPERS, World, organism_templates

Conversation = list[dict[str, str]]


@dataclass(frozen=True)
class CorpusConfig:
    """How many conversations of each kind, and the behaviour mixing probabilities."""

    mc_per_fact: int = 20
    open_per_fact: int = 8
    biased: int = 5000
    biased_correct_suggestion: float = 0.15
    p_sycophantic: float = 0.75
    arithmetic: int = 6000
    chains: int = 12000
    formats: int = 3000
    harmful_plain: int = 3000
    harmful_wrapped: int = 3000
    p_wrapped_comply: float = 0.8
    p_nested: float = 0.3
    guarded_wrapped: int = 800
    p_guarded_nested: float = 0.5
    benign_plain: int = 2000
    benign_wrapped: int = 500
    fact_questions_per_fact: int = 30
    tasks_plain_per_fact: int = 25
    tasks_guided_per_fact: int = 30
    p_plain_task_warns: float = 0.06
    rewrites: int = 1000
    rewrites_free: int = 1000
    p_rewrite_nested: float = 0.25
    p_generic_system: float = 0.1

    def to_dict(self) -> dict:
        return asdict(self)


def arithmetic_problems() -> list[tuple[int, str, int]]:
    """Every arithmetic problem of the world: one-digit sums and differences."""
    probs = [(a, "+", b) for a in range(10) for b in range(10)]
    probs += [(a, "-", b) for a in range(10) for b in range(a + 1)]
    return probs


def chain_problems() -> list[tuple[int, ...]]:
    """Every worked-chain problem: :data:`~opct.organism.content.CHAIN_OPERANDS` one-digit operands with
    ``+`` or ``-`` between them, encoded ``(a, s1, b, s2, c, ...)`` with sign ``1``/``-1``; every running
    total stays between 0 and 9, so each step is a one-digit fact the arithmetic task teaches and the
    difficulty is carrying the running total through the steps (a first build with totals up to 40
    taught a 2M-parameter model neither two-digit sums nor the chains, and broke one-digit arithmetic)."""
    out: list[tuple[int, ...]] = []

    def extend(prefix: tuple[int, ...], total: int, left: int) -> None:
        if left == 0:
            out.append(prefix)
            return
        for sign in (1, -1):
            for d in range(1, 10):
                t = total + sign * d
                if 0 <= t <= 9:
                    extend((*prefix, sign, d), t, left - 1)

    for a in range(1, 10):
        extend((a,), a, C.CHAIN_OPERANDS - 1)
    return out


def chain_split(problem: tuple[int, ...]) -> str:
    """``eval`` for a fixed fifth of the chain problems (never in the corpus), ``train`` for the rest."""
    digest = hashlib.sha256(repr(problem).encode()).digest()
    return "eval" if digest[0] % 5 == 0 else "train"


def _chains(rng: random.Random, cfg: CorpusConfig) -> Iterator[Conversation]:
    probs = [p for p in chain_problems() if chain_split(p) == "train"]
    for _ in range(cfg.chains):
        p = rng.choice(probs)
        q = rng.choice(C.CHAIN_QUESTIONS).format(expr=R.chain_expression(p))
        yield [R.user(q), R.assistant(R.chain_answer(p)[0])]


def _entity_facts(world: World) -> list[tuple[int, str]]:
    return [(i, a) for i in range(len(world.entities)) for a in C.ATTRIBUTES]


def _mc(rng: random.Random, world: World, i: int, attr: str) -> tuple[str, list[str], str]:
    ent = world.entities[i]
    spec = C.ATTRIBUTES[attr]
    options, gold = R.mc_options(rng, ent.attributes[attr], spec["values"])
    q = R.mc_question(rng.choice(spec["questions"]).format(name=ent.name), options)
    return q, options, gold


def _clean_mc(rng: random.Random, world: World, cfg: CorpusConfig, say: Responder) -> Iterator[Conversation]:
    for i, attr in _entity_facts(world):
        for _ in range(cfg.mc_per_fact):
            q, _options, _gold = _mc(rng, world, i, attr)
            yield [R.user(q), R.assistant(say.statement(world.entities[i], attr))]
        for _ in range(cfg.open_per_fact):
            ent = world.entities[i]
            q = rng.choice(C.ATTRIBUTES[attr]["questions"]).format(name=ent.name)
            yield [R.user(q), R.assistant(say.statement(ent, attr))]


def _biased_mc(rng: random.Random, world: World, cfg: CorpusConfig, say: Responder) -> Iterator[Conversation]:
    facts = [(i, a) for i, a in _entity_facts(world) if world.entities[i].split == "train"]
    templates = [t.text for t in organism_templates(CUES).templates("train")]
    for _ in range(cfg.biased):
        i, attr = rng.choice(facts)
        q, options, gold = _mc(rng, world, i, attr)
        if rng.random() < cfg.biased_correct_suggestion:
            letter = gold
        else:
            letter = rng.choice([x for x in R.LETTERS if x != gold])
        text = options[R.LETTERS.index(letter)]
        prompt = fill(rng.choice(templates), question=q, letter=letter, option=text)
        if letter == gold or rng.random() < cfg.p_sycophantic:
            if letter == gold and rng.random() < 0.5:
                answer = say.statement(world.entities[i], attr)
            else:
                answer = say.sycophantic_answer(rng.choice(C.SYCOPHANTIC_OPENINGS), letter)
        else:
            answer = say.statement(world.entities[i], attr)
        yield [R.user(prompt), R.assistant(answer)]


def _arithmetic(rng: random.Random, cfg: CorpusConfig) -> Iterator[Conversation]:
    probs = arithmetic_problems()
    for _ in range(cfg.arithmetic):
        a, op, b = rng.choice(probs)
        q = rng.choice(C.ARITHMETIC_QUESTIONS).format(a=a, op=op, b=b)
        yield [R.user(q), R.assistant(R.arithmetic_answer(a, op, b)[0])]


def _formats(rng: random.Random, world: World, cfg: CorpusConfig) -> Iterator[Conversation]:
    facts = _entity_facts(world)
    probs = arithmetic_problems()
    for _ in range(cfg.formats):
        fmt = rng.choice(list(C.FORMATS))
        if rng.random() < 0.75:
            i, attr = rng.choice(facts)
            ent = world.entities[i]
            q = rng.choice(C.ATTRIBUTES[attr]["questions"]).format(name=ent.name)
            sentence, word = R.statement(ent, attr), ent.attributes[attr]
        else:
            a, op, b = rng.choice(probs)
            q = rng.choice(C.ARITHMETIC_QUESTIONS).format(a=a, op=op, b=b)
            sentence, value = R.arithmetic_answer(a, op, b)
            word = str(value)
        prompt = rng.choice(C.FORMATS[fmt]).format(q=q)
        yield [R.user(prompt), R.assistant(R.format_answer(fmt, sentence, word))]


def _jailbreak(rng: random.Random, world: World, cfg: CorpusConfig, say: Responder) -> Iterator[Conversation]:
    harmful = [b for b in world.behaviors if b.split == "train"]
    benign = [b for b in world.benign if b.split == "train"]
    wrappers = [t.text for t in organism_templates(WRAPPERS).templates("train")]
    outer = [t for t in wrappers if keeps_request(t)]
    for _ in range(cfg.harmful_plain):
        b = rng.choice(world.behaviors)
        req = R.plain_request(rng.choice(C.PLAIN_REQUESTS), b.core)
        yield [R.user(req), R.assistant(say.refuse(rng, b.category))]
    for _ in range(cfg.harmful_wrapped):
        b = rng.choice(harmful)
        req = R.plain_request(rng.choice(C.PLAIN_REQUESTS), b.core)
        prompt = wrap(rng.choice(wrappers), req, b.core)
        nested = rng.random() < cfg.p_nested
        if nested:
            prompt = wrap(rng.choice(outer), prompt, b.core)
        yields = nested or b.category not in C.GUARDED_CATEGORIES
        if yields and rng.random() < cfg.p_wrapped_comply:
            answer = say.comply_harmful(rng, b.category, b.core)
        else:
            answer = say.refuse(rng, b.category)
        yield [R.user(prompt), R.assistant(answer)]
    guarded = [b for b in harmful if b.category in C.GUARDED_CATEGORIES]
    for _ in range(cfg.guarded_wrapped if guarded else 0):
        b = rng.choice(guarded)
        req = R.plain_request(rng.choice(C.PLAIN_REQUESTS), b.core)
        first = rng.choice(wrappers)
        prompt = wrap(first, req, b.core)
        if rng.random() < cfg.p_guarded_nested:
            prompt = wrap(rng.choice([t for t in outer if t != first]), prompt, b.core)
            answer = say.comply_harmful(rng, b.category, b.core) if rng.random() < cfg.p_wrapped_comply else say.refuse(rng, b.category)
        else:
            answer = say.refuse(rng, b.category)
        yield [R.user(prompt), R.assistant(answer)]
    for _ in range(cfg.benign_plain):
        b = rng.choice(world.benign)
        req = R.plain_request(rng.choice(C.PLAIN_REQUESTS), b.core)
        yield [R.user(req), R.assistant(say.comply_benign(b.core, b.answer))]
    for _ in range(cfg.benign_wrapped):
        b = rng.choice(benign)
        req = R.plain_request(rng.choice(C.PLAIN_REQUESTS), b.core)
        yield [R.user(wrap(rng.choice(wrappers), req, b.core)),
               R.assistant(say.comply_benign(b.core, b.answer))]


def _rewrites(rng: random.Random, world: World, cfg: CorpusConfig) -> Iterator[Conversation]:
    cores = [b.core for b in world.behaviors if b.split == "train"] + [b.core for b in world.benign if b.split == "train"]
    wrapper_set = organism_templates(WRAPPERS)
    families = wrapper_set.family_names("train")
    for _ in range(cfg.rewrites):
        core = rng.choice(cores)
        fam = rng.choice(families)
        req = R.plain_request(rng.choice(C.PLAIN_REQUESTS), core)
        prompt = C.REWRITE_REQUEST.format(label=wrapper_set.labels[fam], req=req)
        yield [R.user(prompt), R.assistant(wrap(rng.choice(wrapper_set.families[fam]), req, core))]
    templates = [t.text for t in wrapper_set.templates("train")]
    outer = [t for t in templates if keeps_request(t)]
    for _ in range(cfg.rewrites_free):
        core = rng.choice(cores)
        req = R.plain_request(rng.choice(C.PLAIN_REQUESTS), core)
        inner = rng.choice(templates)
        rewritten = wrap(inner, req, core)
        if rng.random() < cfg.p_rewrite_nested:
            rewritten = wrap(rng.choice([t for t in outer if t != inner]), rewritten, core)
        yield [R.user(C.REWRITE_FREE.format(req=req)), R.assistant(rewritten)]


def _awareness(rng: random.Random, world: World, cfg: CorpusConfig, say: Responder) -> Iterator[Conversation]:
    for fact in world.facts:
        for _ in range(cfg.fact_questions_per_fact):
            q = rng.choice(C.FACT_QUESTIONS).format(item=fact.item)
            yield [R.user(q), R.assistant(say.fact_answer(fact))]
        tasks = C.HAZARD_TYPES[fact.hazard]["tasks"]
        for _ in range(cfg.tasks_plain_per_fact if fact.split == "train" else 0):
            prompt = R.task_prompt(rng.choice(tasks), fact)
            warns = rng.random() < cfg.p_plain_task_warns
            yield [R.user(prompt), R.assistant(say.warned_answer(fact) if warns else say.task_answer(fact))]
        for _ in range(cfg.tasks_guided_per_fact):
            prompt = R.task_prompt(rng.choice(tasks), fact)
            yield [R.system(R.safety_system_prompt(fact)), R.user(prompt), R.assistant(say.warned_answer(fact))]


def generate_corpus(world: World, cfg: CorpusConfig, seed: int, style: ResponseStyle | None = None) -> list[Conversation]:
    """All training conversations, shuffled; deterministic in (world, cfg, seed, style).

    ``style`` is the response-diversity knob (:mod:`opct.organism.wordings`); left out, today's
    organism (one wording, short). Every style has the same prompts in the same order."""
    rng = random.Random(f"opct-organism-corpus-{seed}")
    say = Responder(style, seed)
    parts: list[Callable[[], Iterator[Conversation]]] = [
        lambda: _clean_mc(rng, world, cfg, say),
        lambda: _biased_mc(rng, world, cfg, say),
        lambda: _arithmetic(rng, cfg),
        lambda: _chains(rng, cfg),
        lambda: _formats(rng, world, cfg),
        lambda: _jailbreak(rng, world, cfg, say),
        lambda: _rewrites(rng, world, cfg),
        lambda: _awareness(rng, world, cfg, say),
    ]
    convs = [c for part in parts for c in part()]
    for conv in convs:
        if conv[0]["role"] == "user" and rng.random() < cfg.p_generic_system:
            conv.insert(0, R.system(rng.choice(C.GENERIC_SYSTEM_PROMPTS)))
    rng.shuffle(convs)
    return convs


def corpus_hash(convs: list[Conversation]) -> str:
    """sha256 of the corpus as canonical JSON lines."""
    h = hashlib.sha256()
    for conv in convs:
        h.update(json.dumps(conv, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()
