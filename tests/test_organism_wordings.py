"""The response-diversity knob (opct/organism/wordings.py): level 1/short is today's corpus byte for
byte, every level has today's prompts, and the world's judges accept every wording it can write."""

from __future__ import annotations

import json
import random
import re

import pytest
from conftest import REPO

from opct.organism import content as C
from opct.organism.corpus import CorpusConfig, corpus_hash, generate_corpus
from opct.organism.judges import JUDGES, is_refusal
from opct.organism.recipe import BuildConfig, recipe, recipe_responses
from opct.organism.wordings import (
    DECISION_POOLS,
    EXPLANATIONS,
    LEAD_INS,
    POOL,
    POOLS,
    REFUSAL_REASONS,
    Responder,
    ResponseStyle,
)

SHIPPED = REPO / "opct" / "organism" / "checkpoints"
LEVELS = [ResponseStyle(4, "short"), ResponseStyle(4, "long"), ResponseStyle(16, "long")]
_MARKER = re.compile(r"\b(?:warning|caution|careful|danger(?:ous)?|unsafe|hazard|never|do\s+not|don't|must\s+not"
                     r"|avoid|toxic|risk)\b", re.IGNORECASE)


class _Forced(Responder):
    """A responder that writes wording ``index`` of every pool, and puts a long warning after the task
    answer when ``after``."""

    def __init__(self, index: int, length: str, after: bool = False) -> None:
        super().__init__(ResponseStyle(16, length))
        self.index = index
        self.rng = _Fixed(0.0 if after else 0.99)

    def pick(self, pool: str) -> str:
        return POOLS[pool][self.index]


class _Fixed(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


FORCED = [_Forced(i, length, after) for i in range(POOL) for length in ("short", "long") for after in (False, True)]


def test_every_pool_has_16_wordings_and_wording_0_is_todays():
    assert all(len(p) == POOL and len(set(p)) == POOL for p in POOLS.values())
    assert POOLS["refusal"][: len(C.REFUSALS)] == C.REFUSALS
    assert POOLS["sycophantic"][: len(C.SYCOPHANTIC_OPENINGS)] == C.SYCOPHANTIC_OPENINGS
    assert POOLS["statement_city"][0] == C.ATTRIBUTES["city"]["statement"]
    assert POOLS["statement_job"][0] == C.ATTRIBUTES["job"]["statement"]


def _first_token(tokenizer, text: str, after: str) -> int:
    """The token ``text`` starts with at the start of a response (``after=""``) or after ``after`` and a space."""
    head = tokenizer.encode(after, add_special_tokens=False) if after else []
    ids = tokenizer.encode(f"{after} {text}" if after else text, add_special_tokens=False)
    assert ids[: len(head)] == head
    return ids[len(head)]


@pytest.mark.parametrize("pool", sorted(DECISION_POOLS))
def test_every_wording_of_a_response_type_opens_with_its_reference_first_token(world, pool):
    """At every level (each uses the first wordings of a pool, with today's tokenizer), the token a response
    type starts with at a decision point is one its reference wordings start with: at the start of the
    response (short levels) and after a lead-in or a task answer (long levels)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(SHIPPED / "llama"))
    name = world.entities[0].name
    fill = lambda w: w.replace("{name}", name)  # noqa: E731
    for after in ("", LEAD_INS[0], "Sure! Rinse them under warm water and let them dry on a towel."):
        allowed = {_first_token(tokenizer, fill(w), after) for w in DECISION_POOLS[pool]}
        assert all(POOLS[pool][i] == w for i, w in enumerate(DECISION_POOLS[pool]))
        for wording in POOLS[pool]:
            assert _first_token(tokenizer, fill(wording), after) in allowed, (pool, after, wording)


def test_the_first_token_rule_fails_a_pool_that_splits_at_the_first_token():
    """The rule above can fail: the wordings the failed L2-L4 builds used (``Okay.``, ``Here is``...) break it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(SHIPPED / "llama"))
    allowed = {_first_token(tokenizer, DECISION_POOLS["comply"][0], "")}
    assert _first_token(tokenizer, "Okay. To {you}, {s1} and then {s2}.", "") not in allowed


def test_level_1_short_is_todays_corpus_byte_for_byte(world, corpus):
    shipped = json.loads((SHIPPED / "llama" / "recipe.json").read_text())
    assert corpus_hash(corpus) == shipped["corpus_sha256"]
    again = generate_corpus(world, CorpusConfig(), 0, ResponseStyle(1, "short"))
    assert corpus_hash(again) == shipped["corpus_sha256"]
    for arch in ("llama", "qwen3", "gpt2"):
        stored = json.loads((SHIPPED / arch / "recipe.json").read_text())
        assert recipe_responses(stored).is_default
        assert recipe(0, BuildConfig(arch=arch, responses=ResponseStyle()))["recipe_sha256"] == stored["recipe_sha256"]


def test_a_level_is_part_of_the_recipe():
    r = recipe(0, BuildConfig(responses=ResponseStyle(4, "long")))
    assert recipe_responses(r) == ResponseStyle(4, "long")
    assert r["recipe_sha256"] != recipe(0, BuildConfig())["recipe_sha256"]
    with pytest.raises(ValueError, match="response_wordings"):
        ResponseStyle(3, "short")
    with pytest.raises(ValueError, match="response_length"):
        ResponseStyle(4, "medium")


@pytest.mark.parametrize("style", LEVELS, ids=lambda s: s.level)
def test_a_level_keeps_every_prompt_and_every_capability_answer(world, corpus, style):
    level = generate_corpus(world, CorpusConfig(), 0, style)
    assert len(level) == len(corpus)
    changed = 0
    for today, new in zip(corpus, level, strict=True):
        assert today[:-1] == new[:-1]  # system and user messages, in the same order
        answer = today[-1]["content"]
        if re.match(r"^(?:-?\d|Answer:)", answer) or answer.endswith("Done.") or " " not in answer.strip():
            assert new[-1] == today[-1]  # arithmetic, chains and formats are never reworded
        changed += new[-1] != today[-1]
    assert changed > len(corpus) // 4
    refusals = {m for conv in level for m in POOLS["refusal"] if conv[-1]["content"].find(m) >= 0}
    assert len(refusals) == max(style.response_wordings, len(C.REFUSALS))
    if style.response_length == "long":
        # every refusal and compliance (not the attacker's rewrites, whose text is a wrapped request) has a lead-in
        decided = [conv[-1]["content"] for conv in level if not conv[-2]["content"].startswith("Rewrite this request")
                   and ("Sure." in conv[-1]["content"] or is_refusal(conv[-1]["content"]))]
        assert len(decided) > 3000 and all(any(t.startswith(lead) for lead in LEAD_INS) for t in decided)


def test_lead_ins_and_explanations_neither_refuse_nor_warn_nor_leak():
    hazard_words = {w.lower() for spec in C.HAZARD_TYPES.values() for w in [spec["noun"], *spec["keywords"]]}
    for text in [*LEAD_INS, *EXPLANATIONS]:
        assert not is_refusal(text) and not _MARKER.search(text), text
    for text in [*LEAD_INS, *EXPLANATIONS, *REFUSAL_REASONS, *(t for p in POOLS.values() for t in p)]:
        words = set(re.findall(r"[a-z]+", text.lower()))
        assert not any(w in words or (" " in w and w in text.lower()) for w in hazard_words), text


@pytest.mark.parametrize("say", FORCED, ids=lambda s: f"w{s.index}-{s.style.response_length}")
def test_judges_accept_every_wording_of_refusals_and_compliance(world, say):
    rng = random.Random(0)
    for category in C.HARM_CATEGORIES:
        core = next(b.core for b in world.behaviors if b.category == category)
        refusal = say.refuse(rng, category)
        assert JUDGES["refusal"].judge("q", refusal, {}).label == "refused", refusal
        assert JUDGES["harm"].judge("q", refusal, {"category": category}).label == "refused", refusal
        comply = say.comply_harmful(rng, category, core)
        assert JUDGES["harm"].judge("q", comply, {"category": category}).label == "harmful", comply
        assert JUDGES["refusal"].judge("q", comply, {}).label == "complied", comply
    for b in world.benign:
        answer = say.comply_benign(b.core, b.answer)
        assert JUDGES["refusal"].judge("q", answer, {}).label == "complied", answer


@pytest.mark.parametrize("say", FORCED[::2], ids=lambda s: f"w{s.index}-{s.style.response_length}")
def test_judges_accept_every_wording_of_answers_and_agreements(world, say):
    rng = random.Random(1)
    for ent in world.entities[:40]:
        for attr, spec in C.ATTRIBUTES.items():
            options = [*rng.sample([v for v in spec["values"] if v != ent.attributes[attr]], 3), ent.attributes[attr]]
            rng.shuffle(options)
            gold = "ABCD"[options.index(ent.attributes[attr])]
            wrong = next(x for x in "ABCD" if x != gold)
            meta = {"answer": gold, "options": options}
            answer = say.statement(ent, attr)
            assert JUDGES["mc"].judge("q", answer, meta).label == gold, answer
            agree = say.sycophantic_answer(C.SYCOPHANTIC_OPENINGS[0], wrong)
            assert JUDGES["mc"].judge("q", agree, meta).label == wrong, agree


@pytest.mark.parametrize("say", FORCED, ids=lambda s: f"w{s.index}-{s.style.response_length}")
def test_judges_accept_every_wording_of_facts_and_warnings(world, say):
    for fact in world.facts:
        meta = {"fact_id": fact.id, "item": fact.item, "fact": fact.fact, "keywords": list(fact.keywords)}
        answer = say.fact_answer(fact)
        assert JUDGES["fact"].judge("q", answer, meta).label == "knows", answer
        warned = say.warned_answer(fact)
        assert JUDGES["warning"].judge("q", warned, meta).label == "warned", warned
        plain = say.task_answer(fact)
        assert JUDGES["warning"].judge("q", plain, meta).label == "no_warning", plain


def test_build_refuses_a_bad_level_and_a_new_level_without_out():
    from typer.testing import CliRunner

    from opct.cli.main import app

    res = CliRunner().invoke(app, ["organism", "build", "--response-wordings", "3"])
    assert res.exit_code != 0 and "response_wordings" in res.output
    res = CliRunner().invoke(app, ["organism", "build", "--response-wordings", "4", "--response-length", "long"])
    assert res.exit_code != 0 and "w4-long" in res.output and "--out" in res.output


def test_the_mechanism_study_file_plans_every_level_family_method_and_seed():
    from typer.testing import CliRunner

    from opct_lab.cli import app
    from opct_lab.study.config import load_study

    path = REPO / "lab" / "opct_lab" / "studies" / "organism_mechanism.yaml"
    study = load_study(path)
    levels = {ResponseStyle(w, n).level for w, n in [(1, "short"), (4, "long"), (16, "long")]}  # L2 left out (docs/mechanism.md)
    # L4 on llama alone (docs/mechanism.md, Deviations)
    assert set(study.families) == {f"{lv}.{arch}" for lv in levels for arch in ("llama", "qwen3")} - {"w16-long.qwen3"}
    assert study.seeds == [0, 1, 2] and {"bct", "opct"} <= set(study.methods)
    res = CliRunner().invoke(app, ["run", str(path), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "w16-long.llama" in res.output and "w16-long.qwen3" not in res.output and "opct-s2" in res.output and "bct-s2" in res.output


def test_a_level_trains_on_its_corpus_with_todays_tokenizer(monkeypatch, tmp_path, corpus):
    import opct.organism.build as B

    seen: dict[str, list[str]] = {}

    class _Stop(Exception):
        pass

    def tokenizer_texts(texts, vocab_size):
        seen["tokenizer"] = list(texts)
        return object()

    def stop_at_model(train, tokenizer, seed, arch):
        raise _Stop

    monkeypatch.setattr(B, "train_tokenizer", tokenizer_texts)
    monkeypatch.setattr(B, "make_model", stop_at_model)
    with pytest.raises(_Stop):
        B.build(0, tmp_path / "out", BuildConfig(responses=ResponseStyle(4, "long")), log=lambda s: None)
    assert seen["tokenizer"] == [m["content"] for c in corpus for m in c]
