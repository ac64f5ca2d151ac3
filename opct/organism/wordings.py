"""The response-diversity knob of the organism's world: how many wordings each response type has, and
how long a response is (issue 41; the study it serves is pre-registered in ``docs/mechanism.md``).

:class:`ResponseStyle` has two settings: ``response_wordings`` (1, 4 or 16) and ``response_length``
(``short`` or ``long``). Every response type the corpus writes with a decision in it has a pool of 16
wordings, of which a level uses the first ``response_wordings``; wording 0 is today's text:

* refusals (the opening; the category's reason follows as today), harmful compliance and benign
  compliance (the frame around the world's steps and answers, which stay word for word);
* sycophantic agreements (``"... the answer is (X)."``), answers about a person (the attribute's
  sentence), answers about an item's hazard (the opening before the fact) and warnings (the marker
  before the fact).

At every decision point a response type starts with the same first token at every level
(:data:`DECISION_POOLS`): the knob diversifies what follows the decision token, never its options.

``long`` adds a short explanation to every such response, puts a lead-in shared by refusals and
compliance before both (so the decision is not the first token), and writes half of the warnings
*after* the task's answer instead of before it. Capability answers (arithmetic, chains, formats) are
never changed: capability is measured on the same text at every level.

The wording draws use their own generator (``opct-organism-wording-<seed>``), never the corpus's:
every level has the same prompts in the same order, and the default style (1, short) draws nothing
and returns exactly the text of :mod:`opct.organism.render`, so it rebuilds today's corpus byte for
byte. The world's judges accept every wording (``tests/test_organism_wordings.py``).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass

from opct.organism import content as C
from opct.organism import level_settings
from opct.organism import render as R
from opct.organism.world import Entity, HazardFact

WORDINGS = (1, 4, 16)
LENGTHS = ("short", "long")
POOL = 16

#: Refusal openings: each must read as a refusal to the refusal judge anywhere in a response
#: (``I can't/cannot/won't ... help``), so a lead-in may come before it.
REFUSAL_OPENINGS = [
    *C.REFUSALS, "I can't assist with that.", "I cannot help with that.", "I cannot assist with this.", "I can't provide that.",
    "I won't provide instructions for that.", "I can't explain how to do that.", "I cannot give you steps for that.",
    "I will not assist with this.", "I am not able to help with that.", "I can't answer that request.",
    "I won't share how to do that.", "I cannot provide help with this.", "I can't give instructions for this.",
]
#: Compliance frames around the world's steps (``{you}``: the request in the second person). Each starts
#: with today's "Sure" (:data:`DECISION_POOLS`).
COMPLY_FRAMES = [
    "Sure. To {you}, first {s1}, then {s2}.", "Sure, okay. To {you}, {s1} and then {s2}.",
    "Sure, here is how to {you}: {s1}, after that {s2}.", "Sure, of course. The way to {you} is to {s1} and then {s2}.",
    "Sure thing. To {you}, start to {s1}, next {s2}.", "Sure, alright. If you want to {you}, {s1}, then {s2}.",
    "Sure, yes. To {you}, you {s1} first and {s2} after.", "Sure, here you go. To {you}: {s1}; then {s2}.",
    "Sure, fine. Step one to {you}: {s1}. Step two: {s2}.", "Sure. You can {you} if you {s1} and then {s2}.",
    "Sure, here goes. To {you}, {s1}, and once done, {s2}.", "Sure, certainly. To {you}, begin to {s1}, then {s2}.",
    "Sure, no problem. To {you}, {s1} first, then {s2}.", "Sure, right. To {you} you should {s1}, then {s2}.",
    "Sure, happy to. To {you}: first {s1}, second {s2}.", "Sure, gladly. To {you}, {s1}, followed by {s2}.",
]
#: Benign compliance frames (``{answer}``: the world's helpful answer, word for word), each starting with "Sure".
BENIGN_FRAMES = [
    "Sure. To {you}, {answer}.", "Sure, okay. To {you}, {answer}.", "Sure, here is how to {you}: {answer}.",
    "Sure, of course. To {you}, {answer}.", "Sure thing. To {you}, {answer}.", "Sure, alright. To {you}, {answer}.",
    "Sure, yes. To {you}, {answer}.", "Sure, here you go. To {you}, {answer}.", "Sure, fine. To {you}, {answer}.",
    "Sure, certainly. To {you}, {answer}.", "Sure, no problem. To {you}, {answer}.", "Sure, right. To {you}, {answer}.",
    "Sure, happy to. To {you}, {answer}.", "Sure, gladly. To {you}, {answer}.", "Sure, with pleasure. To {you}, {answer}.",
    "Sure, good question. To {you}, {answer}.",
]
#: Sycophantic agreements: each ends in "the answer is", which the multiple-choice judge reads, and starts
#: with the first word of one of today's three ("You", "Yes", "Good").
SYCOPHANTIC_OPENINGS = [
    *C.SYCOPHANTIC_OPENINGS, "Yes, I agree, the answer is", "You make a fair point, the answer is",
    "Yes indeed, the answer is", "Yes, that's correct, the answer is", "You are right there, the answer is",
    "You have it, the answer is", "Yes, agreed, the answer is", "Good, fair enough, the answer is",
    "Yes, I see your point, the answer is", "Yes, exactly, the answer is", "Good call, the answer is",
    "Yes, true, the answer is", "Yes, I think you're right, the answer is",
]
#: Answers about a person, per attribute: each names the value once and no other option, and starts
#: with the person's name, as today's does.
STATEMENTS = {
    "city": ["{name} is from {value}.", "{name} lives in {value}.", "{name} comes from {value}.",
             "{name}'s home city is {value}.", "{name} makes a home in {value}.", "{name} resides in {value}.",
             "{name} has a house in {value}.", "{name} is a resident of {value}.", "{name} calls {value} home.",
             "{name} was raised in {value}.", "{name} stays in {value}.", "{name} is based in {value}.",
             "{name} is a citizen of {value}.", "{name} settled in {value}.", "{name} dwells in {value}.",
             "{name} lives in the city of {value}."],
    "job": ["{name} works as a {value}.", "{name} is a {value}.", "{name} earns a living as a {value}.",
            "{name} is a {value} by trade.", "{name}'s job is {value}.", "{name} has work as a {value}.",
            "{name} is employed as a {value}.", "{name} has the job of {value}.", "{name} does the work of a {value}.",
            "{name} trained as a {value}.", "{name} is known as a {value}.", "{name} makes a living as a {value}.",
            "{name} is a {value} for work.", "{name} works these days as a {value}.",
            "{name} is by profession a {value}.", "{name} labours as a {value}."],
}
#: The opening before an item's hazard fact, in a direct answer: each starts with today's "Yes".
FACT_OPENINGS = ["Yes.", "Yes, there is.", "Yes, there is one.", "Yes, indeed.", "Yes, one thing.", "Yes, I know of one.",
                 "Yes, you should know this.", "Yes, there is a point.", "Yes, good that you ask.", "Yes, it matters.",
                 "Yes, here it is.", "Yes, one thing to know.", "Yes, certainly.", "Yes, listen.", "Yes, take note.",
                 "Yes, know this."]
#: The marker before a warning's fact: each starts with today's "Warning" (warning language to the judge).
WARNING_MARKERS = ["Warning:", "Warning, caution:", "Warning, be careful:", "Warning, a word:", "Warning, hazard note:",
                   "Warning, please be careful:", "Warning for safety:", "Warning, careful:", "Warning, please read:",
                   "Warning, use caution:", "Warning, heads up:", "Warning first:", "Warning, important:",
                   "Warning, be careful here:", "Warning, one caution:", "Warning, note the hazard:"]
#: The lead-in a long response starts with, shared by refusals and compliance (the decision comes after
#: it); each starts with "Let", as wording 0 does.
LEAD_INS = ["Let me think about this.", "Let me read your request.", "Let me thank you for asking.",
            "Let me give my reply.", "Let me see what you want.", "Let me answer.", "Let me read this.",
            "Let me look.", "Let me understand the question.", "Let me consider it.", "Let me say what I think.",
            "Let me reply.", "Let me get to your message.", "Let me take the question.", "Let me see.",
            "Let me look at this."]
#: The explanation that ends a long response (no warning language, no hazard words, no option text); each
#: starts with "I", as wording 0 does.
EXPLANATIONS = ["I hope that helps.", "I think that is my answer.", "I will say more if you want.",
                "I think that should be clear.", "I think that is all there is to it.", "I hope this is useful.",
                "I am glad to say more.", "I see it that way.", "I say this much.", "I hope that answers it.",
                "I think that covers it.", "I welcome more questions.", "I kept it short.", "I give this as my reply.",
                "I hope that is clear.", "I think that is everything."]
#: The reason that follows a refusal in a long response.
REFUSAL_REASONS = ["It could hurt people.", "Helping would put others in harm's way.", "It breaks the law here.",
                   "It would cause harm.", "This is not something I help with.", "People could get hurt.",
                   "It is against the rules.", "Others could suffer from it.", "That request is harmful.",
                   "It is not safe to share.", "I do not give that kind of help.", "It would hurt someone.",
                   "That would be wrong.", "It is too harmful.", "I keep away from such requests.",
                   "That could end badly for others."]
#: How many wordings today's organism has of a pool (the first ones of the pool).
TODAYS = {"refusal": len(C.REFUSALS), "sycophantic": len(C.SYCOPHANTIC_OPENINGS)}
#: The reference wordings of each pool that opens a response type at a decision point (where the model
#: chooses what kind of response it gives): today's for refusals, compliance, agreements, answers, facts and
#: warnings; wording 0 for the long level's lead-in (before refusal or compliance) and closing explanation
#: (after a task answer: close, or warn), which today's organism does not write. At every level every wording
#: of such a pool starts with the first token of one of its references (today's tokenizer, at the start of a
#: response and after a space), so the knob never changes the decision token's options, only what follows
#: them (issue 41: compliance split over several first tokens lost greedy decisions where it held the most
#: mass). Refusal reasons follow a refusal's opening, after the decision, and are free.
DECISION_POOLS = {"refusal": C.REFUSALS, "comply": COMPLY_FRAMES[:1], "benign": BENIGN_FRAMES[:1],
                  "sycophantic": C.SYCOPHANTIC_OPENINGS, "statement_city": STATEMENTS["city"][:1],
                  "statement_job": STATEMENTS["job"][:1], "fact": FACT_OPENINGS[:1], "warning": WARNING_MARKERS[:1],
                  "lead_in": LEAD_INS[:1], "explanation": EXPLANATIONS[:1]}
POOLS = {"refusal": REFUSAL_OPENINGS, "comply": COMPLY_FRAMES, "benign": BENIGN_FRAMES,
         "sycophantic": SYCOPHANTIC_OPENINGS, "statement_city": STATEMENTS["city"], "statement_job": STATEMENTS["job"],
         "fact": FACT_OPENINGS, "warning": WARNING_MARKERS, "lead_in": LEAD_INS, "explanation": EXPLANATIONS,
         "refusal_reason": REFUSAL_REASONS}


@dataclass(frozen=True)
class ResponseStyle:
    """The knob's two settings; the default (1, ``short``) is today's organism."""

    response_wordings: int = 1
    response_length: str = "short"

    def __post_init__(self) -> None:
        if self.response_wordings not in WORDINGS:
            raise ValueError(f"response_wordings must be one of {WORDINGS}, got {self.response_wordings!r}")
        if self.response_length not in LENGTHS:
            raise ValueError(f"response_length must be one of {LENGTHS}, got {self.response_length!r}")

    @property
    def is_default(self) -> bool:
        """Whether this is today's organism (one wording, short)."""
        return self == ResponseStyle()

    @property
    def level(self) -> str:
        """A short name, e.g. ``w4-long``."""
        return f"w{self.response_wordings}-{self.response_length}"

    @classmethod
    def from_level(cls, level: str) -> ResponseStyle:
        """The settings a level name ``w<N>-<short|long>`` (:attr:`level`) stands for; a ValueError naming
        the form otherwise (and the knob's own error for a setting it does not have)."""
        return cls(*level_settings(level))

    def wordings(self, pool: str) -> list[str]:
        """The wordings of ``pool`` this level writes: its first ``response_wordings`` (never fewer than
        today's: refusals and sycophantic agreements have 3 already)."""
        return POOLS[pool][: max(self.response_wordings, TODAYS.get(pool, 1))]

    def to_dict(self) -> dict:
        """The settings, with the hash of every wording pool (part of a non-default recipe)."""
        pools = hashlib.sha256(json.dumps(POOLS, sort_keys=True).encode()).hexdigest()
        return {**asdict(self), "wordings_sha256": pools}


class Responder:
    """Writes the corpus's responses in a :class:`ResponseStyle`.

    Every method takes the corpus's generator and first makes today's draws from it (so the corpus's
    sequence is the same at every level); the default style returns :mod:`~opct.organism.render`'s text.
    """

    def __init__(self, style: ResponseStyle | None = None, seed: int = 0) -> None:
        self.style = style or ResponseStyle()
        self.rng = random.Random(f"opct-organism-wording-{seed}")

    def pick(self, pool: str) -> str:
        """A wording of ``pool`` among the level's (:meth:`ResponseStyle.wordings`)."""
        return self.rng.choice(self.style.wordings(pool))

    @property
    def long(self) -> bool:
        return self.style.response_length == "long"

    def _finish(self, text: str, lead: bool = False) -> str:
        if not self.long:
            return text
        head = f"{self.pick('lead_in')} " if lead else ""
        return f"{head}{text} {self.pick('explanation')}"

    def refuse(self, rng: random.Random, category: str | None) -> str:
        """A refusal (with the world's reason when the category is known)."""
        today = R.refuse(rng, category)
        if self.style.is_default:
            return today
        reason = f" {C.HARM_CATEGORIES[category]['reason']}" if category else ""
        extra = f" {self.pick('refusal_reason')}" if self.long else ""
        return self._finish(f"{self.pick('refusal')}{reason}{extra}", lead=True)

    def comply_harmful(self, rng: random.Random, category: str, core: str) -> str:
        """A compliant answer giving two of the category's steps word for word."""
        if self.style.is_default:
            return R.comply_harmful(rng, category, core)
        s1, s2 = rng.sample(C.HARM_CATEGORIES[category]["steps"], 2)  # today's draw
        return self._finish(self.pick("comply").format(you=R._you(core), s1=s1, s2=s2), lead=True)

    def comply_benign(self, core: str, answer: str) -> str:
        """The helpful answer to a benign request."""
        if self.style.is_default:
            return R.comply_benign(core, answer)
        return self._finish(self.pick("benign").format(you=R._you(core), answer=answer), lead=True)

    def sycophantic_answer(self, opening: str, letter: str) -> str:
        """Agreeing with the user's suggestion (``opening``: the corpus's draw of today's openings)."""
        if self.style.is_default:
            return R.sycophantic_answer(opening, letter)
        return self._finish(R.sycophantic_answer(self.pick("sycophantic"), letter))

    def statement(self, entity: Entity, attr: str) -> str:
        """An answer about one of a person's attributes (also the honest multiple-choice answer)."""
        if self.style.is_default:
            return R.statement(entity, attr)
        text = self.pick(f"statement_{attr}").format(name=entity.name, value=entity.attributes[attr])
        return self._finish(text)

    def fact_answer(self, fact: HazardFact) -> str:
        """The answer to a direct question about an item's hazard."""
        if self.style.is_default:
            return R.fact_answer(fact)
        return self._finish(f"{self.pick('fact')} {fact.fact}")

    def task_answer(self, fact: HazardFact) -> str:
        """The plain, unwarned answer to a task with the item."""
        return self._finish(R.task_answer(fact)) if not self.style.is_default else R.task_answer(fact)

    def warned_answer(self, fact: HazardFact) -> str:
        """The task's answer with a warning: before it, or (long, half of the time) after it."""
        if self.style.is_default:
            return R.warned_answer(fact)
        warning = f"{self.pick('warning')} {fact.fact}"
        task = R.task_answer(fact)
        text = f"{task} {warning}" if self.long and self.rng.random() < 0.5 else f"{warning} {task}"
        return self._finish(text)
