"""What a training method is, and the context the training loop hands it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from accelerate import Accelerator
from transformers import PreTrainedTokenizerBase

from opct.config import RunConfig
from opct.models import Teacher, render_prompt
from opct.pairs import ConsistencyPair
from opct.rollout import SamplingParams


@dataclass
class TrainContext:
    """Everything a method needs from the loop.

    ``model`` is the prepared module (possibly wrapped for data parallelism): the student's forward
    with gradients goes through it. ``policy`` is the same module unwrapped, for generation.
    """

    cfg: RunConfig
    accelerator: Accelerator
    model: torch.nn.Module
    policy: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    teacher: Teacher
    run_dir: Path
    _rendered: dict[str, list[int]] = field(default_factory=dict)

    @property
    def pad_id(self) -> int:
        tok = self.tokenizer
        return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id

    def step_sampling(self, step: int) -> SamplingParams:
        """Rollout settings of optimizer step ``step`` (its seed advances with the step)."""
        s = self.cfg.sampling
        return SamplingParams(
            n=s.n,
            temperature=s.temperature,
            top_p=s.top_p,
            max_new_tokens=s.max_new_tokens,
            min_new_tokens=s.min_new_tokens,
            seed=self.cfg.seed * 1_000_003 + step,
        )

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of a prompt through the chat template (cached)."""
        key = json.dumps(messages, sort_keys=True)
        if key not in self._rendered:
            self._rendered[key] = render_prompt(self.tokenizer, messages, **self.cfg.model.chat_template_kwargs)
        return self._rendered[key]


@dataclass
class Microbatch:
    """One forward/backward's worth of sequences, prepared without gradients."""

    pairs: list[ConsistencyPair]
    completions: list[list[int]]
    pair_of: list[int]
    sampler_logprobs: list[list[float]] | None = None
    truncated: list[bool] | None = None
    advantages: list[float] | None = None
    rewards: list[float] | None = None

    @property
    def num_tokens(self) -> int:
        return sum(len(c) for c in self.completions)

    def sampler_logprob_tensor(self, like: torch.Tensor) -> torch.Tensor:
        """The sampler's recorded log-probs as a ``[sequences, length]`` tensor shaped like ``like`` (0 beyond each)."""
        out = torch.zeros_like(like)
        for i, lp in enumerate(self.sampler_logprobs or []):
            out[i, : len(lp)] = torch.tensor(lp, dtype=out.dtype)
        return out

    def sampled_stats(
        self, student_lp: torch.Tensor, sampler_lp: torch.Tensor, reference_lp: torch.Tensor, mask: torch.Tensor
    ) -> dict[str, float]:
        """Summed statistics of on-policy samples: KL from sampler to reference, ratio drift, counts."""
        return {
            "kl_sum": ((sampler_lp - reference_lp) * mask).sum().item(),
            "ratio_dev_sum": ((student_lp.detach() - sampler_lp).abs() * mask).sum().item(),
            "sequences": float(len(self.completions)),
            "truncated": float(sum(self.truncated or [])),
        }


class Method(Protocol):
    """A training method: how a step's data becomes microbatches, and a microbatch's loss."""

    name: str

    def __init__(self, ctx: TrainContext) -> None: ...

    def setup(self, pairs: list[ConsistencyPair]) -> None:
        """One-off work before the first step (e.g. BCT's offline targets)."""

    def prepare(self, pairs: list[ConsistencyPair], step: int) -> list[Microbatch]:
        """Turn this process's share of a step's pairs into microbatches (no gradients)."""

    def loss(self, mb: Microbatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Summed per-token loss of a microbatch (with gradients) and summed statistics.

        A statistic named ``mean:<name>`` is a sum over the microbatch's sequences; the loop logs
        ``<name>`` as its mean over the step's sequences (e.g. GRPO's ``reward``).
        """


def split_microbatches(
    pairs: list[ConsistencyPair],
    completions: list[list[int]],
    pair_of: list[int],
    sequences_per_micro: int,
    **per_sequence: list[Any] | None,
) -> list[Microbatch]:
    """Cut sequences into microbatches of about ``sequences_per_micro``, keeping a pair's samples together."""
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(pair_of):
        groups.setdefault(p, []).append(i)
    out: list[Microbatch] = []
    current: list[int] = []
    for p in sorted(groups):
        if current and len(current) + len(groups[p]) > sequences_per_micro:
            out.append(_make_micro(pairs, completions, pair_of, current, per_sequence))
            current = []
        current.extend(groups[p])
    if current:
        out.append(_make_micro(pairs, completions, pair_of, current, per_sequence))
    return out


def rollout_microbatches(
    pairs: list[ConsistencyPair], rollouts: list[Any], sequences_per_micro: int, **per_sequence: list[Any] | None
) -> list[Microbatch]:
    """:func:`split_microbatches` of sampled rollouts, carrying their sampler log-probs and truncation flags."""
    return split_microbatches(
        pairs,
        [r.completion_ids for r in rollouts],
        [r.prompt_index for r in rollouts],
        sequences_per_micro,
        sampler_logprobs=[r.logprobs for r in rollouts],
        truncated=[r.truncated for r in rollouts],
        **per_sequence,
    )


def _make_micro(pairs, completions, pair_of, idx, per_sequence) -> Microbatch:
    local_pairs: dict[int, int] = {}
    for i in idx:
        local_pairs.setdefault(pair_of[i], len(local_pairs))
    extra = {k: [v[i] for i in idx] for k, v in per_sequence.items() if v is not None}
    return Microbatch(
        pairs=[pairs[p] for p in local_pairs],
        completions=[completions[i] for i in idx],
        pair_of=[local_pairs[pair_of[i]] for i in idx],
        **extra,
    )
