"""The off-policy profile (:mod:`opct.diagnostics.offpolicy`) measured on a model, in batched forward passes.

For a seeded sample of each axis's pairs, chunk by chunk: the teacher's greedy answers to the
``teacher_prompt`` (the targets), the student's greedy answers and its own temperature-1 samples of
``prompt`` (the HF sampler, which records each sampled token's log-probability under the model's own
distribution), then one scoring forward of the targets after ``prompt`` (student) and one after
``teacher_prompt`` (teacher). Nothing is trained; the models are put in eval mode for the measurement.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from opct.config import ModelConfig
from opct.diagnostics.offpolicy import PairProfile, first_divergence, summarize
from opct.models import PromptRenderer
from opct.pairs import ConsistencyPair
from opct.sampling.engine import Rollout, SamplingParams
from opct.sampling.hf_sampler import HFSampler
from opct.sampling.hidden_logits import completion_hidden, hidden_scoring
from opct.sampling.logit_rows import positions_fitting
from opct.sampling.scoring import CompletionBatch, completion_logits

#: The seed of the profile's pair sample and of the student's samples.
PROFILE_SEED = 20_260_521
#: MiB of float32 logits a scoring pass may build whole (``train.whole_logits_max_mib``'s default); above it
#: the targets are scored from the final hidden states a chunk of positions at a time.
WHOLE_LOGITS_MAX_MIB = 64.0

#: Logits ``[positions, vocab]`` of one row's positions ``start:stop``.
RowLogits = Callable[[int, int, int], torch.Tensor]


def profile_group(pair: ConsistencyPair) -> str:
    """The column a pair is profiled in: its ``axis``, or for a pair without one (TRL-style pairs) the file or
    source it was read from, so that pairs of different sources are never pooled into one nameless group."""
    return pair.axis or pair.where[0] or "unknown"


def sample_pairs(pairs: list[ConsistencyPair], per_axis: int, seed: int = PROFILE_SEED) -> list[ConsistencyPair]:
    """A seeded sample of at most ``per_axis`` pairs of each group (:func:`profile_group`: an axis, or the source
    of pairs without one; all of a group that has fewer)."""
    by_axis: dict[str, list[ConsistencyPair]] = defaultdict(list)
    for p in pairs:
        by_axis[profile_group(p)].append(p)
    chosen: list[ConsistencyPair] = []
    for axis in sorted(by_axis):
        group = by_axis[axis]
        chosen.extend(group if len(group) <= per_axis else random.Random(f"profile-{axis}-{seed}").sample(group, per_axis))
    return chosen


def pair_cluster(pair: ConsistencyPair) -> Hashable:
    """Pairs that share a ``teacher_prompt`` share their target: one unit of the intervals."""
    return repr(pair.teacher_prompt)


@contextmanager
def eval_mode(*models: torch.nn.Module) -> Iterator[None]:
    """Put ``models`` in eval mode for the block, then give each back the training flag it had, even on an
    error."""
    states = [m.training for m in models]
    for m in models:
        m.eval()
    try:
        yield
    finally:
        for m, was in zip(models, states, strict=True):
            m.train(was)


def measure_profile(
    student: torch.nn.Module,
    tokenizer: Any,
    pairs: list[ConsistencyPair],
    *,
    spec: ModelConfig | None = None,
    teacher: torch.nn.Module | None = None,
    pairs_per_axis: int = 100,
    max_new_tokens: int = 128,
    samples: int = 1,
    pairs_per_batch: int = 16,
    seed: int = PROFILE_SEED,
    progress: Callable[[int, int], None] | None = None,
    whole_logits_max_mib: float = WHOLE_LOGITS_MAX_MIB,
    per_pair: bool = False,
) -> dict[str, Any]:
    """The off-policy profile of ``student`` (and ``teacher``, by default the student itself: the
    run-start model) on a seeded sample of ``pairs_per_axis`` pairs of each axis (or source, for pairs without one).

    ``spec`` renders prompts as training does (chat-template kwargs, system prompt). ``progress(done,
    total)`` is called after each chunk of ``pairs_per_batch`` pairs. A scoring pass whose float32 logits would
    exceed ``whole_logits_max_mib`` takes them from the final hidden states a chunk of positions at a time
    (:func:`_scorers`), so a real vocabulary's ``[pairs, length, vocab]`` logits are never built whole. Returns
    :func:`opct.diagnostics.offpolicy.summarize`'s data with the settings it was measured at (``per_pair``: with
    each pair's record too).
    """
    teacher = teacher if teacher is not None else student
    render = PromptRenderer.for_model(tokenizer, spec or ModelConfig())
    chosen = sample_pairs(pairs, pairs_per_axis, seed)
    batch = max(1, pairs_per_batch)
    profiles: list[PairProfile] = []
    with torch.no_grad(), eval_mode(student, teacher):
        for start in range(0, len(chosen), batch):
            profiles.extend(_measure_chunk(student, teacher, tokenizer, render, chosen[start : start + batch],
                                           max_new_tokens, samples, seed, whole_logits_max_mib))
            if progress is not None:
                progress(min(start + batch, len(chosen)), len(chosen))
    settings = {"pairs_per_axis": pairs_per_axis, "max_new_tokens": max_new_tokens, "samples_per_pair": samples,
                "seed": seed, "cluster": "teacher_prompt"}
    return summarize(profiles, settings, per_pair=per_pair)


def generate_rollouts(model: torch.nn.Module, tokenizer: Any, prompts: list[list[int]], keys: list[str],
                      params: SamplingParams) -> list[Rollout]:
    """Sample ``params.n`` completions of each prompt (token ids) from ``model`` in one batch with the Hugging
    Face sampler, each rollout keyed by the prompt's entry in ``keys``."""
    return HFSampler(model, tokenizer, batch_size=max(1, len(prompts) * params.n)).generate(prompts, params, keys)


def _measure_chunk(
    student: torch.nn.Module, teacher: torch.nn.Module, tokenizer: Any, render: PromptRenderer,
    chunk: list[ConsistencyPair], max_new_tokens: int, samples: int, seed: int,
    whole_logits_max_mib: float = WHOLE_LOGITS_MAX_MIB,
) -> list[PairProfile]:
    keys = [p.id for p in chunk]
    prompts = [render(p.prompt) for p in chunk]
    clean = [render(p.teacher_prompt) for p in chunk]
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=max_new_tokens, seed=seed)
    if teacher is student:  # the run-start model answers both prompts: one batched greedy pass
        both = generate_rollouts(student, tokenizer, clean + prompts, [f"t-{k}" for k in keys] + keys, greedy)
        targets, answers = both[: len(chunk)], both[len(chunk) :]
    else:
        targets = generate_rollouts(teacher, tokenizer, clean, keys, greedy)
        answers = generate_rollouts(student, tokenizer, prompts, keys, greedy)
    own = generate_rollouts(student, tokenizer, prompts, keys,
                    SamplingParams(n=samples, temperature=1.0, max_new_tokens=max_new_tokens, seed=seed))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    target_ids = [r.completion_ids or [pad] for r in targets]  # a model always emits a token; the guard keeps shapes
    order = list(range(len(chunk)))
    student_rows, teacher_rows, positions = _scorers(
        student, teacher, CompletionBatch(prompts, target_ids, order), CompletionBatch(clean, target_ids, order), pad,
        whole_logits_max_mib)
    out: list[PairProfile] = []
    for i, pair in enumerate(chunk):
        ids = target_ids[i]
        answer = answers[i].completion_ids
        d = first_divergence(ids, answer)
        target_parts: list[torch.Tensor] = []
        entropy_parts: list[torch.Tensor] = []
        rank = top1 = None
        for start in range(0, len(ids), positions):
            stop = min(start + positions, len(ids))
            s_logp = torch.log_softmax(student_rows(i, start, stop).float(), dim=-1)
            t_logp = torch.log_softmax(teacher_rows(i, start, stop).float(), dim=-1)
            index = torch.tensor(ids[start:stop], device=s_logp.device)
            target_parts.append(s_logp.gather(-1, index[:, None])[:, 0])
            entropy_parts.append(-(t_logp.exp() * t_logp).sum(-1))
            if d is not None and start <= d < stop:
                rank = int((s_logp[d - start] > s_logp[d - start, ids[d]]).sum()) + 1
                top1 = float(t_logp[d - start].max().exp())
        target_lp, entropy = torch.cat(target_parts), torch.cat(entropy_parts)
        profile = PairProfile(
            pair_id=pair.id, axis=profile_group(pair), cluster=pair_cluster(pair), target=ids,
            target_truncated=targets[i].truncated, answer=answer, answer_truncated=answers[i].truncated,
            target_logprobs=target_lp.tolist(), teacher_entropy=entropy.tolist(),
            sample_logprobs=[r.logprobs for r in own[i * samples : (i + 1) * samples]],
            sample_truncated=[r.truncated for r in own[i * samples : (i + 1) * samples]],
        )
        if rank is not None:
            profile.target_rank_at_divergence = rank
            profile.teacher_top1_at_divergence = top1
        out.append(profile)
    return out


def _scorers(
    student: torch.nn.Module, teacher: torch.nn.Module, student_batch: CompletionBatch, teacher_batch: CompletionBatch,
    pad: int, whole_logits_max_mib: float,
) -> tuple[RowLogits, RowLogits, int]:
    """How row ``i``'s logits at positions ``start:stop`` are had, for the student and the teacher, and how many
    positions to take at a time.

    Whole logits (one forward each, every position at once: the profile as it always was, to the bit) while
    ``rows x length x vocab`` float32 fits in ``whole_logits_max_mib``; above it, where both models pass the
    hidden-state self-check (:func:`opct.sampling.hidden_logits.hidden_scoring`), the final hidden states of
    one forward each and the output head applied to as many positions at a time as fit in the limit.
    """
    rows, length = len(student_batch.completions), student_batch.width
    vocab = student.get_output_embeddings().weight.shape[0]
    fits = positions_fitting(whole_logits_max_mib, vocab)
    heads = None
    if rows * length > fits:
        heads = (hidden_scoring(student, pad), hidden_scoring(teacher, pad))
    if heads is None or heads[0] is None or heads[1] is None:
        s_logits = completion_logits(student, student_batch, pad, share_prefix=False)
        t_logits = completion_logits(teacher, teacher_batch, pad, share_prefix=False)
        return (lambda i, a, b: s_logits[i, a:b]), (lambda i, a, b: t_logits[i, a:b]), max(1, length)
    student_head, teacher_head = heads
    s_hidden = completion_hidden(student, student_batch, pad, share_prefix=False)
    t_hidden = completion_hidden(teacher, teacher_batch, pad, share_prefix=False)
    return ((lambda i, a, b: student_head(s_hidden[i, a:b])), (lambda i, a, b: teacher_head(t_hidden[i, a:b])),
            max(1, fits))
