r"""GRPO training of a local attacker against one frozen target (research/papers.md §d).

The policy being trained is the *attacker*. Each step, for every pair (the attacker instruction
for one train behaviour) it samples ``G = sampling.n`` attack prompts, sends each to the frozen
target (greedy), and scores the response with the attack judge. An episode is a single round here
(``attacker.rounds = 1``), so its reward is that round's score; multi-round episodes are used at
evaluation (:mod:`opct.attack.model_eval`). Rewards are standardised within the behaviour's group
(:func:`opct.losses.group_advantages`: zero for a group whose rewards are all equal) and every
completion token of a sample gets its sample's advantage ``A``.

The loss per completion token, summed by the loop and divided by the step's completion tokens:

.. math::

    \ell_t = -\min\big(r_t A,\ \mathrm{clip}(r_t, 1-\epsilon, 1+\epsilon) A\big) + \beta\, \mathrm{KL}_t,
    \qquad r_t = \pi_\theta(y_t) / \mathrm{sg}[\pi_{\text{sampler}}(y_t)]

with ``KL_t`` the sampled-token KL to the *run-start* attacker (``ctx.teacher``: the adapter
disabled under LoRA). ``attacker.kl_estimator``:

* ``k3`` (default, DeepSeekMath GRPO): ``KL_t = exp(d) - d - 1``, ``d = log pi_ref - log pi_theta``,
  a separate loss term (expected gradient: that of ``KL(pi_ref || pi_theta)``);
* ``log_ratio``: the per-token log-ratio ``log pi_sampler - log pi_ref`` enters the advantage,
  ``A_t = A - beta * (log pi_sampler - log pi_ref)``, whose policy gradient is that of the
  per-position reverse KL (a plain ``+ beta * log-ratio`` loss term would have zero expected gradient).

Each step samples fresh and takes one optimizer step, so the ratio is 1 when the loss is computed
(up to numerics) and the clip only matters if samples were reused.
"""

from __future__ import annotations

import torch

from opct import losses
from opct.attack.attacker_data import behavior_of
from opct.attack.model_attacker import parse_attack_prompt
from opct.methods.base import Microbatch, TrainContext, rollout_microbatches
from opct.pairs import ConsistencyPair
from opct.rollout import HFSampler
from opct.scoring import CompletionBatch, completion_logits, token_logprobs


def _rewrite_parse(reply: str) -> str | None:
    return reply.strip() or None


class GRPOAttackMethod:
    """Per-target GRPO of a local attacker (see the module docstring)."""

    name = "grpo_attack"

    def __init__(self, ctx: TrainContext):
        from opct.attack.scorers import make_scorer

        self.ctx = ctx
        a = ctx.cfg.attacker
        self.sampler = HFSampler(ctx.policy, ctx.tokenizer, batch_size=ctx.cfg.sampling.batch_size)
        self.scorer = make_scorer(a.judge)
        self.parse = _rewrite_parse if a.style == "rewrite" else parse_attack_prompt
        self._target = None
        self.last_episodes: list[dict] = []

    @property
    def target(self):
        """The frozen target (greedy), loaded on first use."""
        if self._target is None:
            self._target = self._load_target()
        return self._target

    def _load_target(self):
        from opct.attack.target import HFTarget
        from opct.models import load_for_inference

        a = self.ctx.cfg.attacker
        model, tokenizer = load_for_inference(a.target, device=str(self.ctx.accelerator.device))
        for p in model.parameters():
            p.requires_grad_(False)
        return HFTarget(model, tokenizer, max_new_tokens=a.target_max_new_tokens, batch_size=a.target_batch_size)

    def setup(self, pairs: list[ConsistencyPair]) -> None:
        for p in pairs:
            behavior_of(p)  # fail before the first step if the data is not attacker pairs
        _ = self.target

    def prepare(self, pairs: list[ConsistencyPair], step: int) -> list[Microbatch]:
        cfg = self.ctx.cfg
        params = self.ctx.step_sampling(step)
        rollouts = self.sampler.generate([self.ctx.render(p.prompt) for p in pairs], params, sample_keys=[p.id for p in pairs])
        tok = self.ctx.tokenizer
        attacks = [self.parse(tok.decode(r.completion_ids, skip_special_tokens=True)) for r in rollouts]
        rewards = self.episode_rewards([behavior_of(pairs[r.prompt_index]) for r in rollouts], attacks)
        advantages = losses.group_advantages(torch.tensor(rewards, dtype=torch.float64), params.n).tolist()
        return rollout_microbatches(pairs, rollouts, cfg.train.micro_batch_size, advantages=advantages, rewards=rewards)

    def episode_rewards(self, behaviors: list, attacks: list[str | None]) -> list[float]:
        """One round per episode: query the target with every non-empty attack and score it (empty = 0)."""
        sent = [i for i, a in enumerate(attacks) if a is not None]
        responses = self.target([attacks[i] for i in sent]) if sent else []
        rewards = [0.0] * len(attacks)
        self.last_episodes = []
        for i, response in zip(sent, responses, strict=True):
            rewards[i] = float(self.scorer(behaviors[i], attacks[i], response))
            self.last_episodes.append({"behavior": behaviors[i].id, "attack": attacks[i], "response": response, "reward": rewards[i]})
        return rewards

    def loss(self, mb: Microbatch) -> tuple[torch.Tensor, dict[str, float]]:
        cfg, ctx = self.ctx.cfg, self.ctx
        a = cfg.attacker
        share = cfg.train.share_prompt_prefix
        chunk = cfg.loss.chunk_size
        batch = CompletionBatch(prompts=[ctx.render(p.prompt) for p in mb.pairs], completions=mb.completions, prompt_of=mb.pair_of)
        targets, mask = batch.targets_and_mask()
        with torch.no_grad(), ctx.teacher.active() as reference:
            ref_logits = completion_logits(reference, batch, ctx.pad_id, share)
            targets, mask = targets.to(ref_logits.device), mask.to(ref_logits.device)
            ref_lp = token_logprobs(ref_logits, targets, chunk) * mask
            del ref_logits
        student_lp = token_logprobs(completion_logits(ctx.model, batch, ctx.pad_id, share), targets, chunk) * mask
        maskf = mask.to(student_lp.dtype)
        sampler_lp = mb.sampler_logprob_tensor(student_lp)
        adv = torch.tensor(mb.advantages or [0.0] * len(mb.completions), dtype=student_lp.dtype, device=student_lp.device)
        per_token_adv = adv[:, None] * maskf
        if a.kl_estimator == "log_ratio":
            per_token_adv = per_token_adv + losses.kl_advantages(sampler_lp, ref_lp, maskf, kl_coef=a.kl_beta)
        per_token = losses.policy_gradient_loss(
            student_lp, sampler_lp, per_token_adv, maskf, kind=cfg.loss.policy_loss, clip_eps=cfg.loss.clip_eps
        )
        if a.kl_estimator == "k3" and a.kl_beta > 0:
            per_token = per_token + a.kl_beta * losses.k3_kl(student_lp, ref_lp, maskf)
        rewards = mb.rewards or []
        stats = {
            **mb.sampled_stats(student_lp, sampler_lp, ref_lp, maskf),
            "mean:reward": float(sum(rewards)),
            "mean:crack_rate": float(sum(r >= a.threshold for r in rewards)),
            "mean:zero_advantage": float(sum(abs(x) < 1e-12 for x in (mb.advantages or []))),
        }
        return per_token.sum(), stats
