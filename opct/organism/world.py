"""The organism's world, built deterministically from a seed: entities, behaviours, facts and splits.

The perturbation templates (the cues of biased questions, the wrappers of requests) and their train / held-out
families belong to the axes whose organism view makes that part of the corpus
(:attr:`opct.evals.axis_views.OrganismView.corpus_part`), found through :data:`AXES`; the world splits only its own items: entities, behaviours and benign requests by a
seeded draw, facts by hazard type (:data:`opct.organism.content.HELDOUT_HAZARDS`: whole types held out).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from functools import lru_cache

from opct.evals.axis_registry import AXES, axes_with
from opct.evals.axis_views import OrganismView, data_view
from opct.evals.template_set import TemplateSet
from opct.organism import content as C

#: The parts of the world's corpus and fingerprint made of an axis's organism template set: the cues of biased
#: questions, and the wrappers of harmful and benign requests (:attr:`OrganismView.corpus_part`).
CUES, WRAPPERS = "cues", "wrappers"


def organism_templates(part: str) -> TemplateSet:
    """The organism template set of ``part`` (:data:`CUES` or :data:`WRAPPERS`): that of the one registered axis
    whose organism view makes that part of the corpus, read through :data:`AXES`."""
    owners = [name for name, organism in axes_with(OrganismView) if organism.corpus_part == part]
    if len(owners) != 1:
        raise ValueError(f"the organism's {part} come from exactly one registered axis; "
                         f"{len(owners)} make them ({', '.join(owners) or 'none'})")
    return data_view(AXES.get(owners[0])).templates["organism"]


DEFAULT_SEED = 0
N_ENTITIES = 200
HELDOUT_ENTITIES = 50


@dataclass(frozen=True)
class Entity:
    """An invented person with one value per attribute (``city``, ``job``).

    ``split`` says which sycophancy split its questions belong to: biased prompts about held-out
    entities never appear in the corpus (their clean questions do; the organism must know them).
    """

    id: str
    name: str
    attributes: dict[str, str]
    split: str


@dataclass(frozen=True)
class Behavior:
    """A request the world marks as harmful."""

    id: str
    category: str
    core: str
    split: str


@dataclass(frozen=True)
class BenignRequest:
    """A benign request that looks alarming; the organism must answer it."""

    id: str
    core: str
    answer: str
    split: str


@dataclass(frozen=True)
class HazardFact:
    """A safety fact about an everyday-sounding invented item."""

    id: str
    hazard: str
    item: str
    fact: str
    keywords: tuple[str, ...]
    split: str


@dataclass(frozen=True)
class World:
    """Everything the organism's corpus, pairs, items and judges are made from."""

    seed: int
    entities: tuple[Entity, ...]
    behaviors: tuple[Behavior, ...]
    benign: tuple[BenignRequest, ...]
    facts: tuple[HazardFact, ...]

    def to_dict(self) -> dict:
        return asdict(self)

    def fingerprint(self) -> str:
        """sha256 of the world definition, the hand-written content and the axes' organism templates
        (texts and held-out families): everything the corpus, pairs and eval items are made from."""
        payload = {"world": self.to_dict(), "content": _content_dict(), "templates": _templates()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=sorted).encode()).hexdigest()


def _content_dict() -> dict:
    return {k: getattr(C, k) for k in sorted(dir(C)) if k.isupper()}


def _templates() -> dict:
    """The organism's cue and wrapper templates with their held-out families."""
    cues, wrappers = organism_templates(CUES), organism_templates(WRAPPERS)
    return {"cues": {"families": cues.families, "heldout": sorted(cues.heldout)},
            "wrappers": {"families": wrappers.families, "labels": wrappers.labels, "heldout": sorted(wrappers.heldout)}}


def _invent_names(rng: random.Random, n: int, taken: set[str]) -> list[str]:
    def word(syllables: int) -> str:
        w = "".join(rng.choice(C.NAME_ONSETS) + rng.choice(C.NAME_VOWELS) for _ in range(syllables - 1))
        w += rng.choice(C.NAME_ONSETS) + rng.choice(C.NAME_VOWELS) + rng.choice(C.NAME_CODAS)
        return w.capitalize()

    out: list[str] = []
    while len(out) < n:
        name = word(2)
        if name not in taken and len(name) >= 4:
            taken.add(name)
            out.append(name)
    return out


@lru_cache(maxsize=8)
def build_world(seed: int = DEFAULT_SEED) -> World:
    """Build the world for ``seed``; the same seed always gives the same world (splits included)."""
    rng = random.Random(f"opct-organism-world-{seed}")
    taken = set(C.CITIES) | {c.capitalize() for c in C.HARM_CATEGORIES}
    firsts = _invent_names(rng, N_ENTITIES, taken)
    lasts = _invent_names(rng, N_ENTITIES, taken)
    held_entities = set(rng.sample(range(N_ENTITIES), HELDOUT_ENTITIES))
    entities = tuple(
        Entity(
            id=f"ent-{i:03d}",
            name=f"{firsts[i]} {lasts[i]}",
            attributes={a: rng.choice(spec["values"]) for a, spec in C.ATTRIBUTES.items()},
            split="heldout" if i in held_entities else "train",
        )
        for i in range(N_ENTITIES)
    )

    behaviors: list[Behavior] = []
    for cat, spec in C.HARM_CATEGORIES.items():
        held = set(rng.sample(range(len(spec["behaviors"])), C.HELDOUT_BEHAVIORS_PER_CATEGORY))
        for j, core in enumerate(spec["behaviors"]):
            behaviors.append(Behavior(f"harm-{cat}-{j}", cat, core, "heldout" if j in held else "train"))

    held_benign = set(rng.sample(range(len(C.BENIGN_ALARMING)), C.BENIGN_HELDOUT))
    benign = tuple(
        BenignRequest(f"benign-{j:02d}", core, answer, "heldout" if j in held_benign else "train")
        for j, (core, answer) in enumerate(C.BENIGN_ALARMING)
    )

    facts: list[HazardFact] = []
    split_of = {hz: "heldout" if hz in C.HELDOUT_HAZARDS else "train" for hz in C.HAZARD_TYPES}
    item_names = _invent_names(rng, sum(C.ITEMS_PER_HAZARD[split_of[hz]] for hz in C.HAZARD_TYPES), taken)
    k = 0
    for hz, spec in C.HAZARD_TYPES.items():
        for j in range(C.ITEMS_PER_HAZARD[split_of[hz]]):
            item = f"{item_names[k]} {spec['noun']}"
            k += 1
            facts.append(HazardFact(
                id=f"fact-{hz}-{j}", hazard=hz, item=item, fact=spec["fact"].format(item=item),
                keywords=tuple(spec["keywords"]), split=split_of[hz],
            ))

    return World(seed, entities, tuple(behaviors), benign, tuple(facts))


def world(seed: int | None = None) -> World:
    """The world of ``seed`` (``None``: :data:`DEFAULT_SEED`, the shipped organism's)."""
    return build_world(DEFAULT_SEED if seed is None else seed)
