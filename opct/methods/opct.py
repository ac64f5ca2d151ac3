"""OPCT: the student samples on ``prompt``; the frozen teacher scores the same tokens on ``teacher_prompt``."""

from __future__ import annotations

import torch

from opct import losses
from opct.methods.base import Microbatch, TrainContext, rollout_microbatches
from opct.pairs import ConsistencyPair
from opct.rollout import HFSampler
from opct.scoring import CompletionBatch, completion_logits, token_logprobs


class OPCTMethod:
    """On-policy consistency training (research/papers.md §a), with fresh samples every step."""

    name = "opct"

    def __init__(self, ctx: TrainContext):
        self.ctx = ctx
        self.sampler = HFSampler(
            ctx.policy,
            ctx.tokenizer,
            batch_size=ctx.cfg.sampling.batch_size,
            share_prefix=ctx.cfg.train.share_prompt_prefix,
        )

    def setup(self, pairs: list[ConsistencyPair]) -> None:
        return None

    def prepare(self, pairs: list[ConsistencyPair], step: int) -> list[Microbatch]:
        cfg = self.ctx.cfg
        params = self.ctx.step_sampling(step)
        prompts = [self.ctx.render(p.prompt) for p in pairs]
        rollouts = self.sampler.generate(prompts, params, sample_keys=[p.id for p in pairs])
        return rollout_microbatches(pairs, rollouts, cfg.train.micro_batch_size)

    def _batch(self, mb: Microbatch, side: str) -> CompletionBatch:
        prompts = [self.ctx.render(getattr(p, side)) for p in mb.pairs]
        return CompletionBatch(prompts=prompts, completions=mb.completions, prompt_of=mb.pair_of)

    def loss(self, mb: Microbatch) -> tuple[torch.Tensor, dict[str, float]]:
        cfg, ctx = self.ctx.cfg, self.ctx
        share = cfg.train.share_prompt_prefix
        chunk = cfg.loss.chunk_size
        student_batch = self._batch(mb, "prompt")
        teacher_batch = self._batch(mb, "teacher_prompt")
        targets, mask = student_batch.targets_and_mask()
        with torch.no_grad(), ctx.teacher.active() as teacher:
            teacher_logits = completion_logits(teacher, teacher_batch, ctx.pad_id, share)
            targets, mask = targets.to(teacher_logits.device), mask.to(teacher_logits.device)
            teacher_lp = token_logprobs(teacher_logits, targets, chunk) * mask
            if cfg.loss.kind == "sampled":
                del teacher_logits
        student_logits = completion_logits(ctx.model, student_batch, ctx.pad_id, share)
        student_lp = token_logprobs(student_logits, targets, chunk) * mask
        sampler_lp = mb.sampler_logprob_tensor(student_lp)
        maskf = mask.to(student_lp.dtype)
        if cfg.loss.kind == "sampled":
            per_token = losses.sampled_token_loss(
                student_lp,
                sampler_lp,
                teacher_lp,
                maskf,
                kl_coef=cfg.loss.kl_coef,
                discount=cfg.loss.kl_discount,
                kind=cfg.loss.policy_loss,
                clip_eps=cfg.loss.clip_eps,
            )
        elif cfg.loss.kind == "topk":
            per_token = losses.topk_reverse_kl(student_logits, teacher_logits, mask, cfg.loss.topk, chunk)
        else:
            per_token = losses.full_divergence(
                student_logits, teacher_logits, mask, cfg.loss.divergence, cfg.loss.jsd_beta, chunk
            )
        return per_token.sum(), mb.sampled_stats(student_lp, sampler_lp, teacher_lp, maskf)
