"""What a training method is, the context the training loop hands it, and the one scoring call."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import torch
from accelerate import Accelerator
from pydantic import BaseModel
from transformers import PreTrainedTokenizerBase

from opct.config import GenerationConfig, RunConfig
from opct.methods.logit_path import chunked_heads, logits_chunk_positions
from opct.models import PromptRenderer, Teacher
from opct.pairs import ConsistencyPair
from opct.sampling.engine import SamplingEngine, SamplingParams
from opct.sampling.factory import make_sampler
from opct.sampling.hidden_logits import OutputHead, completion_hidden
from opct.sampling.logit_rows import LogitRows, logprobs_and_entropy
from opct.sampling.scoring import CompletionBatch, completion_logits, token_entropy_sum, token_logprobs


@dataclass
class TrainContext:
    """Everything a method needs from the loop.

    ``model`` is the prepared module (possibly wrapped for data parallelism): the student's forward
    with gradients goes through it. ``policy`` is the same module unwrapped, for generation.
    ``gather``: set when the weights are sharded over the processes (FSDP): the loop's way of gathering a
    module's whole weights for a call (:func:`opct.training.fsdp.gathered`). Generation then runs on gathered
    weights (:meth:`generating`) and every scoring forward is collective.
    """

    cfg: RunConfig
    accelerator: Accelerator
    model: torch.nn.Module
    policy: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    teacher: Teacher
    run_dir: Path
    gather: Callable[[torch.nn.Module], AbstractContextManager[Any]] | None = None
    _rendered: dict[str, list[int]] = field(default_factory=dict)

    @property
    def sharded(self) -> bool:
        """Whether the weights are sharded over the processes (FSDP)."""
        return self.gather is not None

    @property
    def pad_id(self) -> int:
        tok = self.tokenizer
        return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id

    def sample(self, sampler: Any, pairs: list[ConsistencyPair], params: SamplingParams) -> list[Any]:
        """Sample ``params.n`` completions of each pair's ``prompt`` with the current policy, under the
        training autocast (so recorded log-probs are computed as the student's are)."""
        # an engine with its own copy of the weights (vLLM) needs no gathered policy
        gathering = nullcontext() if getattr(sampler, "holds_own_weights", False) else self.generating(self.policy)
        with self.accelerator.autocast(), gathering:
            return sampler.generate([self.render(p.prompt) for p in pairs], params, sample_keys=[p.id for p in pairs])

    def sampler(self, gen: GenerationConfig, model: torch.nn.Module, share_prefix: bool = True) -> SamplingEngine:
        """The sampling engine ``gen`` asks for (``engine: hf`` or ``vllm``, :func:`opct.sampling.factory.make_sampler`)
        on ``model``. Under DDP or FSDP2 each process builds its own (a vLLM engine per process, colocated)."""
        return make_sampler(gen, model, self.tokenizer, self.cfg.model, share_prefix=share_prefix)

    def generating(self, module: torch.nn.Module) -> AbstractContextManager[Any]:
        """Around a generation with ``module`` (the policy, or the active teacher): under FSDP its weights
        are gathered for the call (every process must enter it), otherwise nothing."""
        return self.gather(module) if self.gather is not None else nullcontext(module)

    def step_sampling(self, gen: GenerationConfig, step: int) -> SamplingParams:
        """Rollout settings ``gen`` for optimizer step ``step`` (its seed advances with the step)."""
        return SamplingParams.from_config(gen, seed=self.cfg.seed * 1_000_003 + step)

    def batch(self, mb: Microbatch, side: Literal["prompt", "teacher_prompt"]) -> CompletionBatch:
        """The microbatch's completions after each pair's ``side`` prompt (as rendered token ids)."""
        prompts = [self.render(getattr(p, side)) for p in mb.pairs]
        return CompletionBatch(prompts=prompts, completions=mb.completions, prompt_of=mb.pair_of)

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of a prompt through the chat template (cached)."""
        key = json.dumps(messages, sort_keys=True)
        if key not in self._rendered:
            self._rendered[key] = PromptRenderer.for_model(self.tokenizer, self.cfg.model)(messages)
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

    def sampled_stats(self, scores: PairScores) -> dict[str, float]:
        """Summed statistics of on-policy samples: KL from sampler to reference, ratio drift, counts."""
        assert scores.reference_lp is not None
        return {
            "kl_sum": ((scores.sampler_lp - scores.reference_lp) * scores.mask).sum().item(),
            "ratio_dev_sum": ((scores.student_lp.detach() - scores.sampler_lp).abs() * scores.mask).sum().item(),
            "mismatch_max": float(((scores.student_lp.detach() - scores.sampler_lp).abs() * scores.mask).max()),
            "sequences": float(len(self.completions)),
            "truncated": float(sum(self.truncated or [])),
            "entropy_sum": scores.entropy_sum,
        }


class OffPolicySamplingWarning(UserWarning):
    """Rollouts are drawn from a tempered or truncated policy while the loss uses the model's own."""


def warn_if_off_policy(gen: GenerationConfig, method: str) -> None:
    """Say once, at the start of a run, when sampling makes the importance ratio depart from the
    behaviour policy.

    opct follows the official local trainer: the recorded sampler log-prob is the model's own
    (temperature 1, whole vocabulary), so at temperature != 1 or top-p < 1 the ratio and the KL
    refer to the untempered policy while the tokens come from the tempered, truncated one.
    """
    parts = [f"temperature {gen.temperature:g}"] if gen.temperature not in (0.0, 1.0) else []
    if gen.top_p < 1.0:
        parts.append(f"top-p {gen.top_p:g}")
    if gen.temperature == 0.0:
        parts.append("temperature 0 (greedy, deterministic rollouts)")
    if parts:
        import warnings

        warnings.warn(
            f"{method}: sampling at {' and '.join(parts)}; the importance ratio and the KL use the model's "
            "untempered, untruncated log-probs (as the official OPCT local trainer does), so rollouts are "
            "not exactly on-policy for them",
            OffPolicySamplingWarning,
            stacklevel=3,
        )


#: What every method logs: ``entropy``, the student's mean next-token entropy over the completion
#: tokens it trains on (from :func:`score_pair`).
ENTROPY_STATS: dict[str, tuple[str, str]] = {"entropy": ("entropy_sum", "tokens")}
#: What every on-policy method logs beyond the loss: ``kl_to_teacher`` is the mean per-token
#: ``log pi_sampler - log pi_ref``; ``ratio_abs_log_dev`` the mean ``|log pi_theta - log pi_sampler|``
#: (0 when the rollouts are exactly on-policy): the mean sampler-trainer mismatch per token, whose largest
#: value over the step's tokens is ``logprob_mismatch_max`` (a ``"max"`` statistic: the loop takes the largest).
SAMPLED_STATS: dict[str, tuple[str, str]] = {
    "kl_to_teacher": ("kl_sum", "tokens"),
    "ratio_abs_log_dev": ("ratio_dev_sum", "tokens"),
    "logprob_mismatch_max": ("mismatch_max", "max"),
    **ENTROPY_STATS,
}


@dataclass
class PairScores:
    """Per-token scores of a microbatch's completions; every tensor is ``[sequences, completion_len]``
    (``..._logits`` add a vocabulary axis), zero past each completion's end."""

    mask: torch.Tensor  # 1.0 on real completion tokens
    student_lp: torch.Tensor  # log pi_theta(y_t | prompt, y_<t), with gradients
    sampler_lp: torch.Tensor  # log pi_sampler(y_t | prompt, y_<t) recorded at sampling (0 when not sampled)
    reference_lp: torch.Tensor | None = None  # log pi_ref(y_t | reference prompt, y_<t), no gradients
    student_logits: torch.Tensor | None = None
    reference_logits: torch.Tensor | None = None
    student_rows: LogitRows | None = None  # the student's logits, whole or from hidden states (with gradients)
    reference_rows: LogitRows | None = None  # the reference's logits, likewise (no gradients)
    entropy_sum: float = 0.0  # summed entropy of the student's next-token distribution over the completion tokens


def score_pair(
    ctx: TrainContext,
    mb: Microbatch,
    reference_side: Literal["prompt", "teacher_prompt"] | None = None,
    keep_logits: bool = False,
    reference_temperature: float = 1.0,
    logit_rows: bool = False,
) -> PairScores:
    """Log-probs of ``mb``'s completions under the student after ``prompt`` (with gradients) and,
    with ``reference_side``, under the frozen run-start model after that side's prompt (no gradients).

    The one scoring call of every method: OPCT's teacher scores ``teacher_prompt``, GRPO's reference
    scores ``prompt``, BCT needs no reference. ``keep_logits`` keeps the whole logits; ``logit_rows``
    keeps them as :class:`~opct.sampling.logit_rows.LogitRows` for vocabulary-wide losses (then the student's
    log-probs carry no gradient). ``reference_temperature`` divides the reference's logits before its
    log-softmax (OPCT's ``teacher_temperature``; at 1.0 they are left exactly as computed).

    Unless ``keep_logits``, logits larger than ``train.whole_logits_max_mib`` are never built whole: the
    forwards stop at the final hidden states and the log-probs (and the loss's divergences) are taken
    ``train.logprob_chunk_positions`` positions at a time (:func:`opct.methods.logit_path.chunked_heads` says when).
    """
    positions = len(mb.completions) * max(len(c) for c in mb.completions)
    heads = None if keep_logits else chunked_heads(ctx.cfg.train, ctx.policy, ctx.teacher if reference_side else None,
                                                   positions, ctx.pad_id, ctx.sharded)
    if heads is not None:
        return _score_from_hidden(ctx, mb, reference_side, reference_temperature, logit_rows, *heads)
    share, chunk = ctx.cfg.train.share_prompt_prefix, ctx.cfg.train.logprob_chunk_positions
    share = share and not ctx.sharded  # under FSDP one forward per call on every process, whatever the batch
    student_batch = ctx.batch(mb, "prompt")
    targets, mask = student_batch.targets_and_mask()
    reference_lp = reference_logits = None
    keep = keep_logits or logit_rows
    if reference_side is not None:
        # The same autocast as the student: under mixed precision a teacher copy run in full
        # precision would differ from the run-start student by rounding alone.
        with torch.no_grad(), ctx.teacher.active() as reference, ctx.accelerator.autocast():
            reference_logits = completion_logits(reference, ctx.batch(mb, reference_side), ctx.pad_id, share)
            if reference_temperature != 1.0:
                reference_logits = reference_logits / reference_temperature
            targets, mask = targets.to(reference_logits.device), mask.to(reference_logits.device)
            reference_lp = token_logprobs(reference_logits, targets, chunk) * mask
            if not keep:
                reference_logits = None
    # A checkpointed layer fills no KV cache in a forward with gradients: the student scores whole sequences then.
    student_share = share and not (ctx.cfg.train.gradient_checkpointing and torch.is_grad_enabled())
    with ctx.accelerator.autocast():
        student_logits = completion_logits(ctx.model, student_batch, ctx.pad_id, student_share)
    targets, mask = targets.to(student_logits.device), mask.to(student_logits.device)
    student_lp = token_logprobs(student_logits, targets, chunk) * mask
    entropy_sum = token_entropy_sum(student_logits.detach(), mask, chunk)
    return PairScores(
        mask=mask.to(student_lp.dtype),
        student_lp=student_lp,
        sampler_lp=mb.sampler_logprob_tensor(student_lp),
        reference_lp=reference_lp,
        student_logits=student_logits if keep else None,
        reference_logits=reference_logits,
        student_rows=LogitRows(logits=student_logits) if logit_rows else None,
        reference_rows=LogitRows(logits=reference_logits) if logit_rows and reference_logits is not None else None,
        entropy_sum=entropy_sum,
    )


def _score_from_hidden(
    ctx: TrainContext,
    mb: Microbatch,
    reference_side: Literal["prompt", "teacher_prompt"] | None,
    reference_temperature: float,
    logit_rows: bool,
    student_head: OutputHead,
    reference_head: OutputHead | None,
) -> PairScores:
    """:func:`score_pair` from the final hidden states: no ``[N, L, V]`` tensor is built."""
    share = ctx.cfg.train.share_prompt_prefix
    chunk = logits_chunk_positions(ctx.cfg.train, student_head.layer.out_features)
    student_batch = ctx.batch(mb, "prompt")
    targets, mask = student_batch.targets_and_mask()
    reference_lp = reference_rows = None
    if reference_side is not None and reference_head is not None:
        with torch.no_grad(), ctx.teacher.active() as reference, ctx.accelerator.autocast():
            hidden = completion_hidden(reference, ctx.batch(mb, reference_side), ctx.pad_id, share)
            reference_rows = LogitRows(hidden=hidden, head=reference_head.at_temperature(reference_temperature))
            reference_lp, _ = logprobs_and_entropy(reference_rows, targets, mask, chunk, grad=False)
    # A checkpointed layer fills no KV cache in a forward with gradients: the student scores whole sequences then.
    student_share = share and not (ctx.cfg.train.gradient_checkpointing and torch.is_grad_enabled())
    with ctx.accelerator.autocast():
        hidden = completion_hidden(ctx.model, student_batch, ctx.pad_id, student_share)
        student_rows = LogitRows(hidden=hidden, head=student_head)
        student_lp, entropy_sum = logprobs_and_entropy(student_rows, targets, mask, chunk, grad=not logit_rows)
    mask = mask.to(student_lp.device)
    return PairScores(
        mask=mask.to(student_lp.dtype),
        student_lp=student_lp,
        sampler_lp=mb.sampler_logprob_tensor(student_lp),
        reference_lp=reference_lp.to(student_lp.device) if reference_lp is not None else None,
        student_rows=student_rows if logit_rows else None,
        reference_rows=reference_rows if logit_rows else None,
        entropy_sum=entropy_sum,
    )


class Method(Protocol):
    """A training method: how a step's data becomes microbatches, and a microbatch's loss.

    ``config_class`` is the method's settings section (``cfg.method_config``). ``stats`` declares
    what the loop logs each step: ``{logged name: (summed statistic, per "tokens" or "sequences")}``
    for the sums :meth:`loss` returns (or ``"max"``: the statistic is a largest value, and the largest is logged). ``logs_rollouts``: whether its completions are samples worth
    writing to ``rollouts.jsonl.gz``. ``compute``: which tokens it generates and has the teacher score,
    each ``"trained"`` (the tokens each step trains on), ``"cached"`` (targets generated once into the
    run's cache of the method's name) or ``"none"``; recorded in the run manifest and read by
    :func:`opct.runs.compute.run_compute`. How it is shown and compared is its
    :class:`~opct.methods.MethodCard`, given where it is registered (or as a ``card`` attribute).
    """

    name: ClassVar[str]
    config_class: ClassVar[type[BaseModel]]
    stats: ClassVar[dict[str, tuple[str, str]]]
    logs_rollouts: ClassVar[bool]
    compute: ClassVar[dict[str, str]]

    def __init__(self, ctx: TrainContext) -> None: ...

    def setup(self, pairs: list[ConsistencyPair]) -> None:
        """One-off work before the first step (e.g. BCT's offline targets)."""

    def prepare(self, pairs: list[ConsistencyPair], step: int) -> list[Microbatch]:
        """Turn this process's share of a step's pairs into microbatches (no gradients)."""

    def loss(self, mb: Microbatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Summed per-token loss of a microbatch (with gradients) and summed statistics (see ``stats``)."""


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
