"""The experiment file's settings blocks: how every model is evaluated (``eval:``), attacked
(``attack:``), and the named variants of a training method (``variants:``) an ablation compares."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from opct.attack.attackers import ATTACKERS
from opct.attack.search import SearchConfig
from opct.config import AnyValue, StrictSettings, generation_settings
from opct.evals.config import EvalOptions
from opct.evals.contract import SHORTEST_ANSWER_LIMIT
from opct.registry import UnknownNameError


class EvalSettings(EvalOptions):
    """How every model of the experiment is evaluated: the training axes on each split, then capability."""

    splits: list[Literal["heldout", "train"]] = Field(default_factory=lambda: ["heldout", "train"], min_length=1, description="perturbation families evaluated: heldout (never trained on) and train")
    capability: bool = Field(True, description="also evaluate the axes without pairs (capability), once per model")
    generation: generation_settings(max_new_tokens=64) = Field(  # type: ignore[valid-type]
        description="how every model answers: greedy, 64 new tokens unless set")

    @model_validator(mode="after")
    def _answers_fit(self) -> EvalSettings:
        check_answer_room("eval", self.generation.max_new_tokens)
        return self


def check_answer_room(block: str, max_new_tokens: int) -> None:
    """Refuse a limit no answer and its end fit in (:data:`~opct.evals.contract.SHORTEST_ANSWER_LIMIT`), before
    anything trains or generates: every answer would be cut off and nothing measured."""
    if max_new_tokens < SHORTEST_ANSWER_LIMIT:
        raise ValueError(f"{block}.generation.max_new_tokens {max_new_tokens} is too small: an answer needs at least "
                         f"{SHORTEST_ANSWER_LIMIT} new tokens (a token of answer and the end of sequence), so every "
                         f"answer would be cut off and nothing measured; set it to {SHORTEST_ANSWER_LIMIT} or more")


class AttackSettings(StrictSettings):
    """The adaptive per-target attacker (``strategy``, the budgeted search unless set) run against every model: on
    the organism's held-out behaviours, or on real data the behaviours file of ``eval.real.behaviors``."""

    enabled: bool = Field(False, description="attack every model (adds the attack columns)")
    strategy: str = Field("search", description="the registered attacker (ATTACKERS, as `opct attack --strategy`): search "
                                                "or a plugin's; its own check runs before anything trains (model needs "
                                                "an attacker model, which no experiment setting gives)")
    budget: int = Field(24, gt=0, description="target queries per behaviour")
    limit: int | None = Field(None, gt=0, description="real data: attack a seeded sample of this many behaviours")
    threshold: float = Field(0.5, gt=0.0, le=1.0, description="a behaviour is cracked when a response scores at least this")
    seed: Annotated[int, AnyValue("a seed: every integer is one")] = Field(0, description="seed of the search and of the behaviour sample")
    static_baseline: bool = Field(True, description="also try every single wrapper once and compare")
    search: dict[str, Any] = Field(default_factory=dict, description="other search settings: top_k, ucb_c, max_depth")
    generation: generation_settings(max_new_tokens=256) = Field(  # type: ignore[valid-type]
        description="the target's replies: greedy, one per query (max_new_tokens, sequences_per_call)",
    )

    @field_validator("strategy")
    @classmethod
    def _known_attacker(cls, value: str) -> str:
        if value not in ATTACKERS:  # by name only: an attacker's module (and torch) loads when it attacks
            raise ValueError(str(UnknownNameError("attacker", value, ATTACKERS.names())))
        return value

    @model_validator(mode="after")
    def _check(self) -> AttackSettings:
        g = self.generation
        check_answer_room("attack", g.max_new_tokens)
        if g.n != 1 or g.temperature != 0.0 or g.top_p != 1.0 or g.min_new_tokens != 0:
            raise ValueError("attack.generation: the target answers each query once, greedily "
                             "(n 1, temperature 0, top_p 1, min_new_tokens 0); set max_new_tokens and sequences_per_call")
        fields = set(SearchConfig.__dataclass_fields__) - {"budget", "threshold", "seed"}
        unknown = sorted(set(self.search) - fields)
        if unknown and self.strategy == "search":  # another attacker's own check judges its settings
            raise ValueError(f"attack.search has unknown key(s) {unknown}; use {sorted(fields)}")
        return self


#: A variant's name is a model key and a folder name; ``-s<digits>`` is the seed suffix, so no name ends in it.
_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_.]*(-[a-z0-9_.]+)*$")
_SEED_SUFFIX = re.compile(r"-s\d+$")


class Variant(StrictSettings):
    """A named variant of a training method: the method's recipe with some settings changed.

    ``settings`` are dotted keys (``opct.loss``, ``optim.lr``, ``train.max_steps``), each replacing that
    setting of the method's recipe (the experiment's shared ``train`` settings, then the method's
    ``method_settings``); a dict value replaces the whole block, as in a selection grid."""

    method: str = Field(description="the registered training method this is a variant of")
    settings: dict[str, Any] = Field(default_factory=dict, description="dotted setting -> value, over the method's recipe")

    @field_validator("settings")
    @classmethod
    def _recipe_only(cls, value: dict[str, Any]) -> dict[str, Any]:
        fixed = [k for k in value if k.split(".")[0] in ("method", "seed", "name", "output_dir", "model", "data")]
        if fixed:
            raise ValueError(f"a variant changes the recipe, not {', '.join(fixed)} (the experiment sets those)")
        return value


def check_variant_name(name: str) -> str:
    """``name`` when it can be a variant's model key and folder, else ValueError saying why."""
    if not _VARIANT_NAME.match(name):
        raise ValueError(f"variant name {name!r}: use lower-case letters, digits, '.', '_' and single '-'")
    if _SEED_SUFFIX.search(name):
        raise ValueError(f"variant name {name!r} ends like a seed suffix (-s<digits>); rename it")
    return name
