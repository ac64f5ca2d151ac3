"""KL(fine-tuned ‖ base) on the training prompts, on the fine-tuned model's own samples (*RL's Razor*'s measure).

*RL's Razor* (Shenfeld, Pari, Agrawal, arXiv 2509.04259) finds that forgetting follows the KL divergence
between the fine-tuned and the base policy, measured on the training task. Estimated here by Monte Carlo:
for a seeded sample of the training pairs (the profile's sample, :func:`opct.diagnostics.measure.sample_pairs`),
the fine-tuned model writes ``samples`` temperature-1 answers to each ``prompt``; each answer's KL term is
``Σ_t log π_ft(y_t | x, y_<t) − log π_base(y_t | x, y_<t)`` (the fine-tuned log-probs are the sampler's own,
the base's come from one scoring forward per batch, :func:`opct.sampling.scoring.completion_logprobs`). Reported: the mean per answer (``kl_per_sequence``, nats; an
answer cut off at the token limit is left out and counted, its sum being partial) and per token over every
sampled token (``kl_per_token``), each with a bootstrap interval that resamples pairs sharing a
``teacher_prompt`` together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from opct.config import ModelConfig
from opct.diagnostics.measure import PROFILE_SEED, eval_mode, generate_rollouts, pair_cluster, sample_pairs
from opct.models import PromptRenderer
from opct.pairs import ConsistencyPair
from opct.sampling.engine import SamplingParams
from opct.sampling.scoring import CompletionBatch, completion_logprobs
from opct.stats.estimate import clustered_mean


def kl_terms(student_logprobs: list[float], base_logprobs: list[float]) -> float:
    """One answer's KL term: the sum over its tokens of the fine-tuned minus the base log-probability."""
    if len(student_logprobs) != len(base_logprobs):
        raise ValueError(f"{len(student_logprobs)} fine-tuned and {len(base_logprobs)} base log-probs")
    return float(sum(s - b for s, b in zip(student_logprobs, base_logprobs, strict=True)))


def summarize_kl(rows: list[tuple[Any, list[float], list[float], bool]], settings: dict[str, Any]) -> dict[str, Any]:
    """The KL record from ``(cluster, fine-tuned log-probs, base log-probs, truncated)`` per answer."""
    complete = [(c, kl_terms(s, b)) for c, s, b, cut in rows if not cut]
    tokens = [(c, s_t - b_t) for c, s, b, _ in rows for s_t, b_t in zip(s, b, strict=True)]
    per_sequence = clustered_mean([v for _, v in complete], [c for c, _ in complete])
    per_token = clustered_mean([v for _, v in tokens], [c for c, _ in tokens])
    return {**settings, "answers": len(rows), "truncated": sum(cut for *_, cut in rows),
            "kl_per_sequence": per_sequence.to_dict(), "kl_per_token": per_token.to_dict()}


def measure_kl_to_base(
    student: torch.nn.Module, base: torch.nn.Module, tokenizer: Any, pairs: list[ConsistencyPair], *,
    spec: ModelConfig | None = None, pairs_per_axis: int = 100, samples: int = 4, max_new_tokens: int = 128,
    pairs_per_batch: int = 16, seed: int = PROFILE_SEED, progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """KL(``student`` ‖ ``base``) on a seeded sample of ``pairs``' prompts (see the module docstring).
    ``student`` and ``base`` share ``tokenizer``; nothing is trained."""
    render = PromptRenderer.for_model(tokenizer, spec or ModelConfig())
    chosen = sample_pairs(pairs, pairs_per_axis, seed)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    params = SamplingParams(n=samples, temperature=1.0, max_new_tokens=max_new_tokens, seed=seed)
    rows: list[tuple[Any, list[float], list[float], bool]] = []
    step = max(1, pairs_per_batch)
    with torch.no_grad(), eval_mode(student, base):
        for start in range(0, len(chosen), step):
            chunk = chosen[start : start + step]
            prompts = [render(p.prompt) for p in chunk]
            own = [r for r in generate_rollouts(student, tokenizer, prompts, [p.id for p in chunk], params) if r.completion_ids]
            # the base scores every answer in one forward; a prompt with n answers is encoded once
            batch = CompletionBatch(prompts, [r.completion_ids for r in own], [r.prompt_index for r in own])
            base_lp = completion_logprobs(base, batch, pad)[0] if own else None
            for i, r in enumerate(own):
                rows.append((pair_cluster(chunk[r.prompt_index]), list(r.logprobs),
                             base_lp[i, : len(r.completion_ids)].tolist(), r.truncated))
            if progress is not None:
                progress(min(start + step, len(chosen)), len(chosen))
    settings = {"pairs_per_axis": pairs_per_axis, "samples_per_pair": samples, "max_new_tokens": max_new_tokens,
                "seed": seed}
    return summarize_kl(rows, settings)
