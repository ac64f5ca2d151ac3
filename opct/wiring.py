"""Built-in registrations: the one place the outer layers plug into the core's registries.

The training core (config, pairs, models, rollout, scoring, losses, methods, train) never imports
the axes, evaluation, the attacker or the organism; they reach it through registries filled here,
lazily (``"module:attr"`` strings), so ``import opct`` stays cheap:

* :data:`opct.config.MODEL_ALIASES` ``organism`` -> the shipped organism checkpoint (Llama) and
  ``organism-<arch>`` -> its build on each family (``llama``, ``qwen3``, ``gpt2``) (the lab registers the
  study's level builds, ``organism-<arch>-<level>``, when it is imported); each embedded chat model's name and
  aliases (``smollm2``, ``smollm2-135m-instruct``) -> its converted folder, fetched and converted on first use
  (:mod:`opct.embedded`);
* :data:`opct.pairs.PAIR_SOURCES` ``organism:<axis|attacker>[:<split>]`` and ``attacker:<file>``;
* :data:`opct.methods.METHODS` ``grpo_attack`` -> :class:`opct.attack.grpo.GRPOAttackMethod`;
* validation's :data:`~opct.training.plugins.VALIDATION_JUDGES` ``organism`` -> each axis's own judge
  (:func:`opct.evals.axis_registry.judge_behaviour`) and :data:`~opct.training.plugins.CAPABILITY_PROBES`
  ``organism`` -> the capability axis's probe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.config import MODEL_ALIASES
from opct.methods import METHODS
from opct.pairs import PAIR_SOURCES
from opct.training.plugins import CAPABILITY_PROBES, VALIDATION_JUDGES

#: The organism's families (:data:`opct.organism.ORGANISM_ARCHS`, named here so that registering the
#: aliases imports nothing of the organism; a test keeps the two equal).
ORGANISM_ALIAS_ARCHS = ("llama", "qwen3", "gpt2")


@dataclass(frozen=True)
class OrganismCheckpoint:
    """The model alias of one organism family: called, the directory of its shipped checkpoint."""

    arch: str = "llama"

    def __call__(self) -> Path:
        from opct.organism import built_checkpoint

        return built_checkpoint(self.arch)


@dataclass(frozen=True)
class EmbeddedModelFolder:
    """The model alias of an embedded chat model: called, its converted folder (fetched, checked and converted
    first when it is not there yet: :func:`opct.embedded.get_embedded_model`)."""

    name: str

    def __call__(self) -> Path:
        # deferred: the store imports filelock and the pip and GGUF helpers, needed only when the alias is used
        from opct.embedded import get_embedded_model

        return get_embedded_model(self.name)


#: The embedded chat models' names and aliases (:data:`opct.embedded.EMBEDDED_MODELS`, named here so that
#: registering them imports nothing of the store; a test keeps the two equal).
EMBEDDED_ALIASES = {"smollm2-135m-instruct": ("smollm2-135m-instruct", "smollm2")}


def organism_source(argument: str) -> Sequence[Mapping[str, Any] | Any]:
    """``organism:<axis>[:<split>]`` (split defaults to train): the organism world's pairs of a
    registered axis; ``organism:attacker:<split>`` gives attacker instructions for GRPO training."""
    axis, _, split = argument.partition(":")
    if axis == "attacker":
        from opct.attack.attacker_data import organism_attacker_pairs

        if (split or "train") not in ("train", "heldout"):  # the world's behaviours are split in two
            raise ValueError(f"organism pair source {argument!r}: unknown split {split!r}; choose one of train, heldout")
        return organism_attacker_pairs(split or "train")
    from opct.organism.pairs import organism_pair_source

    return organism_pair_source(argument)


def register_builtins() -> None:
    """Fill the core registries with the built-in entries (idempotent)."""
    for alias, arch in (("organism", "llama"), *((f"organism-{a}", a) for a in ORGANISM_ALIAS_ARCHS)):
        if not MODEL_ALIASES.is_registered(alias):
            MODEL_ALIASES.register(alias, OrganismCheckpoint(arch))
    for name, aliases in EMBEDDED_ALIASES.items():
        for alias in aliases:
            if not MODEL_ALIASES.is_registered(alias):
                MODEL_ALIASES.register(alias, EmbeddedModelFolder(name))
    if not PAIR_SOURCES.is_registered("organism"):
        PAIR_SOURCES.register("organism", organism_source)
    if not PAIR_SOURCES.is_registered("attacker"):
        PAIR_SOURCES.register("attacker", "opct.attack.attacker_data:file_attacker_pairs")
    if not METHODS.is_registered("grpo_attack"):
        METHODS.register("grpo_attack", "opct.attack.grpo:GRPOAttackMethod")
    if not VALIDATION_JUDGES.is_registered("organism"):
        VALIDATION_JUDGES.register("organism", "opct.evals.axis_registry:judge_behaviour")
    if not CAPABILITY_PROBES.is_registered("organism"):
        CAPABILITY_PROBES.register("organism", "opct.axes.capability.probe:capability_probe")
