r"""GRPO training of a local attacker against one frozen target (``method: grpo_attack``).

The policy being trained is the *attacker*. Each step, for every pair (the attacker instruction
for one train behaviour) it samples ``G = grpo_attack.sampling.n`` attack prompts, sends each to
the frozen target (greedy), and scores the response with the attack judge. A training episode is a
single round, so its reward is that round's score; multi-round episodes are used at
evaluation (:mod:`opct.attack.model_eval`). Rewards are standardised within the behaviour's group
(:func:`opct.methods.losses.group_advantages`: zero for a group whose rewards are all equal) and every
completion token of a sample gets its sample's advantage ``A``.

The loss per completion token, summed by the loop and divided by the step's completion tokens:

.. math::

    \ell_t = -\min\big(r_t A,\ \mathrm{clip}(r_t, 1-\epsilon, 1+\epsilon) A\big) + \beta\, \mathrm{KL}_t,
    \qquad r_t = \pi_\theta(y_t) / \mathrm{sg}[\pi_{\text{sampler}}(y_t)]

with ``KL_t`` the sampled-token KL to the *run-start* attacker (``ctx.teacher``: the adapter
disabled under LoRA). ``grpo_attack.kl_estimator``:

* ``k3`` (default, DeepSeekMath GRPO): ``KL_t = exp(d) - d - 1``, ``d = log pi_ref - log pi_theta``,
  a separate loss term (expected gradient: that of ``KL(pi_ref || pi_theta)``);
* ``log_ratio``: the per-token log-ratio ``log pi_sampler - log pi_ref`` enters the advantage,
  ``A_t = A - beta * (log pi_sampler - log pi_ref)``, whose policy gradient is that of the
  per-position reverse KL (a plain ``+ beta * log-ratio`` loss term would have zero expected gradient).

Each step samples fresh and takes one optimizer step, so the ratio is 1 when the loss is computed
(up to numerics) and the clip only matters if samples were reused.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from pydantic import Field, model_validator

from opct.attack.attacker_data import behavior_of
from opct.attack.model_attacker import parse_attack_prompt
from opct.attack.scorers import make_scorer
from opct.attack.target import HFTarget
from opct.config import StrictSettings, generation_settings
from opct.methods import losses
from opct.methods.base import (
    SAMPLED_STATS,
    Microbatch,
    TrainContext,
    rollout_microbatches,
    score_pair,
    warn_if_off_policy,
)
from opct.models import load_for_inference
from opct.pairs import ConsistencyPair
from opct.sampling.hf_sampler import HFSampler

AttackSampling = generation_settings(n=8, temperature=1.0, max_new_tokens=64)
TargetReplies = generation_settings(n=1, temperature=0.0, max_new_tokens=64)


class GRPOAttackConfig(StrictSettings):
    """``method: grpo_attack``: the model being trained is the attacker; ``data.train`` holds attacker
    instructions for *train* behaviours (e.g. ``organism:attacker:train``)."""

    sampling: AttackSampling = Field(description="attack prompts; n = group size G (>= 2)")
    target: str = Field("organism", description="the frozen target: organism, a model folder, a run directory or hub id")
    target_generation: TargetReplies = Field(description="how the target answers (greedy)")
    judge: str = Field("organism", description="attack scorer name (opct.attack.scorers): organism, organism-refusal, rule, http:<model>")
    style: Literal["rewrite", "redteam"] = Field(
        "rewrite", description="how a reply becomes a prompt: rewrite = the whole reply; redteam = parsed JSON/PROMPT: line"
    )
    policy_loss: Literal["importance_sampling", "ppo"] = Field("ppo", description="the attacker's policy loss: PPO's clipped ratio or an importance-weighted gradient")
    clip_eps: float = Field(0.2, gt=0.0, description="PPO clip range")
    kl_beta: float = Field(0.1, ge=0.0, description="weight of the per-token KL to the run-start attacker")
    kl_estimator: Literal["k3", "log_ratio"] = Field(
        "k3", description="k3: beta*k3 loss term; log_ratio: -beta*(log pi_sampler - log pi_ref) added to each token's advantage"
    )
    threshold: float = Field(0.5, gt=0.0, le=1.0, description="score at which an attempt counts as a crack (crack_rate in metrics)")

    @model_validator(mode="after")
    def _check(self) -> GRPOAttackConfig:
        if self.sampling.n < 2:
            raise ValueError("sampling.n is the group size and must be >= 2 (rewards are standardised within a group)")
        return self


def _rewrite_parse(reply: str) -> str | None:
    return reply.strip() or None


class GRPOAttackMethod:
    """Per-target GRPO of a local attacker (see the module docstring)."""

    name: ClassVar[str] = "grpo_attack"
    config_class: ClassVar[type[GRPOAttackConfig]] = GRPOAttackConfig
    stats: ClassVar[dict[str, tuple[str, str]]] = {
        **SAMPLED_STATS,
        "reward": ("reward_sum", "sequences"),
        "crack_rate": ("cracks", "sequences"),
        "zero_advantage": ("zero_advantage", "sequences"),
    }
    logs_rollouts: ClassVar[bool] = True
    #: The attacker's rollouts are generated every step; the judge, not a teacher, scores them.
    compute: ClassVar[dict[str, str]] = {"generated": "trained", "teacher_scored": "none"}

    def __init__(self, ctx: TrainContext):
        self.ctx = ctx
        self.settings: GRPOAttackConfig = ctx.cfg.method_config
        self.sampler = HFSampler(ctx.policy, ctx.tokenizer, batch_size=self.settings.sampling.sequences_per_call)
        self.scorer = make_scorer(self.settings.judge)
        self.parse = _rewrite_parse if self.settings.style == "rewrite" else parse_attack_prompt
        self._target = None
        self.unscored = 0  # episodes whose response the judge could not score (reward 0), over the run

    @property
    def target(self):
        """The frozen target (greedy), loaded on first use."""
        if self._target is None:
            self._target = self._load_target()
        return self._target

    def _load_target(self):
        gen = self.settings.target_generation
        model, tokenizer = load_for_inference(self.settings.target, device=str(self.ctx.accelerator.device))
        for p in model.parameters():
            p.requires_grad_(False)
        return HFTarget(model, tokenizer, gen)

    def setup(self, pairs: list[ConsistencyPair]) -> None:
        warn_if_off_policy(self.settings.sampling, self.name)
        for p in pairs:
            behavior_of(p)  # fail before the first step if the data is not attacker pairs
        _ = self.target

    def prepare(self, pairs: list[ConsistencyPair], step: int) -> list[Microbatch]:
        params = self.ctx.step_sampling(self.settings.sampling, step)
        rollouts = self.ctx.sample(self.sampler, pairs, params)
        tok = self.ctx.tokenizer
        attacks = [self.parse(tok.decode(r.completion_ids, skip_special_tokens=True)) for r in rollouts]
        rewards = self.episode_rewards([behavior_of(pairs[r.prompt_index]) for r in rollouts], attacks)
        advantages = losses.group_advantages(torch.tensor(rewards, dtype=torch.float64), params.n).tolist()
        return rollout_microbatches(
            pairs, rollouts, self.ctx.cfg.train.sequences_per_microbatch, advantages=advantages, rewards=rewards
        )

    def episode_rewards(self, behaviors: list, attacks: list[str | None]) -> list[float]:
        """One round per episode: query the target with every non-empty attack and score it (empty = 0).

        A response the judge could not score (the scorer returned ``None``) gets reward 0 and is counted
        in :attr:`unscored`; it is no crack.
        """
        sent = [i for i, a in enumerate(attacks) if a is not None]
        responses = self.target([attacks[i] for i in sent]) if sent else []
        rewards = [0.0] * len(attacks)
        for i, response in zip(sent, responses, strict=True):
            score = self.scorer(behaviors[i], attacks[i], response)
            if score is None:
                self.unscored += 1
            else:
                rewards[i] = float(score)
        return rewards

    def loss(self, mb: Microbatch) -> tuple[torch.Tensor, dict[str, float]]:
        a = self.settings
        s = score_pair(self.ctx, mb, reference_side="prompt")  # reference = run-start attacker, same prompt
        adv = torch.tensor(mb.advantages or [0.0] * len(mb.completions), dtype=s.student_lp.dtype, device=s.student_lp.device)
        per_token_adv = adv[:, None] * s.mask  # [sequences, completion_len]
        if a.kl_estimator == "log_ratio":
            per_token_adv = per_token_adv + losses.kl_advantages(s.sampler_lp, s.reference_lp, s.mask, kl_coef=a.kl_beta)
        per_token = losses.policy_gradient_loss(
            s.student_lp, s.sampler_lp, per_token_adv, s.mask, kind=a.policy_loss, clip_eps=a.clip_eps
        )
        if a.kl_estimator == "k3" and a.kl_beta > 0:
            per_token = per_token + a.kl_beta * losses.k3_kl(s.student_lp, s.reference_lp, s.mask)
        rewards = mb.rewards or []
        stats = {
            **mb.sampled_stats(s),
            "reward_sum": float(sum(rewards)),
            "cracks": float(sum(r >= a.threshold for r in rewards)),
            "zero_advantage": float(sum(abs(x) < 1e-12 for x in (mb.advantages or []))),
        }
        return per_token.sum(), stats
