"""The sampling contract every engine keeps: settings, one rollout, the engine protocol, per-sample seeds.

The HF sampler (:mod:`opct.sampling.hf_sampler`) and the vLLM one (:mod:`opct.sampling.vllm_sampler`)
both import these types; neither imports the other.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``temperature == 0`` means greedy."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    min_new_tokens: int = 0
    seed: int = 0

    @classmethod
    def from_config(cls, gen: Any, seed: int) -> SamplingParams:
        """The settings of an :class:`opct.config.GenerationConfig` with ``seed``."""
        return cls(
            n=gen.n,
            temperature=gen.temperature,
            top_p=gen.top_p,
            max_new_tokens=gen.max_new_tokens,
            min_new_tokens=gen.min_new_tokens,
            seed=seed,
        )


@dataclass
class Rollout:
    """One sampled completion of one prompt.

    ``logprobs[t]`` is the sampler's log-probability of ``completion_ids[t]`` under the model's own
    (temperature 1, unfiltered) distribution, the quantity the importance ratio and the sampled-token
    KL need. The completion includes the end-of-sequence token when the model emitted one;
    ``truncated`` is true when it stopped at ``max_new_tokens`` instead.
    """

    prompt_index: int
    sample_index: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    truncated: bool


class SamplingEngine(Protocol):
    """Anything that turns prompts (token ids) into rollouts."""

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, sample_keys: list[str] | None = None
    ) -> list[Rollout]: ...


def sample_seed(seed: int, key: str, sample_index: int) -> int:
    """A per-sample seed that does not depend on batch composition, order or process count."""
    digest = hashlib.blake2b(f"{seed}|{key}|{sample_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFF_FFFF_FFFF_FFFF
