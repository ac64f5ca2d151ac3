r"""OPCT (arXiv 2605.21834): the student samples on ``prompt``; the frozen teacher scores the same
tokens on ``teacher_prompt``; the loss is a per-token divergence between the two.

With the default ``loss.kind: sampled`` the loss is the paper's sampled-token reverse KL trained as
an importance-weighted policy gradient (:func:`opct.methods.losses.sampled_token_loss`):

.. math::

    \mathrm{kl}_t = \log \pi_{\text{sampler}}(y_t \mid x, y_{<t}) - \log \pi_{\text{teacher}}(y_t \mid x', y_{<t}),
    \qquad A_t = -\beta \sum_{s \ge t} \gamma^{s-t} \mathrm{kl}_s,
    \qquad L = -\sum_t \frac{\pi_\theta(y_t \mid x, y_{<t})}{\mathrm{sg}[\pi_{\text{sampler}}(y_t \mid x, y_{<t})]} A_t

with ``x = prompt``, ``x' = teacher_prompt``, ``beta = loss.kl_coef`` and ``gamma = loss.kl_discount``.
With ``teacher_temperature`` :math:`\tau \ne 1` the teacher is :math:`\mathrm{softmax}(z_{\text{teacher}} / \tau)`
in every loss kind (the ``kl_to_teacher`` statistic too): a knob for the target's sharpness alone.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import torch
from pydantic import Discriminator, Field, Tag, model_validator

from opct.config import ConfigError, RolloutSettings, RunConfig, StrictSettings, Why
from opct.errors import DistributionError
from opct.methods import losses
from opct.methods.base import (
    SAMPLED_STATS,
    Microbatch,
    TrainContext,
    rollout_microbatches,
    score_pair,
    warn_if_off_policy,
)
from opct.methods.logit_path import logits_chunk_positions
from opct.pairs import ConsistencyPair
from opct.sampling.merged_lora import merged_sampling_copy


class SampledLoss(StrictSettings):
    """The paper's loss: sampled-token reverse KL trained as an importance-weighted policy gradient.

    Each loss kind declares ``logits_copies``, its own term of the dry run's memory plan: how many
    ``[positions, vocabulary]`` logits chunks it holds at once (``logits_chunks`` in
    :mod:`opct.training.memory_plan`, which reads it from the config). This one: the student's alone.
    """

    logits_copies: ClassVar[int] = 1

    kind: Literal["sampled"] = Field("sampled", description="the divergence: sampled (the paper's), topk or full; each kind takes only its own keys")
    kl_coef: Annotated[float, Why("it is the whole loss's scale (A_t = -kl_coef * KL): 0 trains nothing, and a "
                                  "negative one trains away from the teacher")] = Field(
        1.0, gt=0.0, description="weight of the sampled-token KL in the loss (the official code's 1.0)")
    kl_discount: float = Field(0.0, ge=0.0, le=1.0, description="gamma: 0 = per-token KL, 1 = sequence KL")
    policy_loss: Literal["importance_sampling", "ppo"] = Field("importance_sampling", description="how the KL advantage trains: importance-weighted policy gradient, or PPO's clipped ratio")
    clip_eps: float | None = Field(None, gt=0.0, description="PPO clip range (policy_loss: ppo only; default 0.2)")

    @model_validator(mode="after")
    def _check(self) -> SampledLoss:
        if self.policy_loss == "ppo" and self.clip_eps is None:
            self.clip_eps = 0.2
        elif self.policy_loss != "ppo" and self.clip_eps is not None:
            raise ValueError("clip_eps is used only with policy_loss: ppo; remove it or set policy_loss: ppo")
        return self


class TopKLoss(StrictSettings):
    """Reverse KL over the student's top-k tokens at each completion position."""

    logits_copies: ClassVar[int] = 2  # the student's chunk and the teacher's

    kind: Literal["topk"] = Field(description="topk: reverse KL over the student's top-k tokens per position")
    topk: int = Field(20, gt=0, description="tokens per position the KL is summed over")
    form: Literal["partial", "renormalised", "tail"] = Field(
        "partial", description="partial: the top-k terms of the full reverse KL (opct's default); renormalised: both "
        "distributions renormalised over the top k (TRL SDFT); tail: the top k plus a bucket of the rest (TRL SDFT's "
        "distillation_add_tail)")


class FullLoss(StrictSettings):
    """A divergence over the whole vocabulary at each completion position."""

    logits_copies: ClassVar[int] = 2  # the student's chunk and the teacher's

    kind: Literal["full"] = Field(description="full: a divergence over the whole vocabulary per position")
    divergence: Literal["reverse_kl", "forward_kl", "jsd"] = Field("reverse_kl", description="reverse_kl (student || teacher), forward_kl or jsd")
    jsd_beta: float | None = Field(None, gt=0.0, lt=1.0, description="JSD mixture weight (divergence: jsd only; default 0.5)")

    @model_validator(mode="after")
    def _check(self) -> FullLoss:
        if self.divergence == "jsd" and self.jsd_beta is None:
            self.jsd_beta = 0.5
        elif self.divergence != "jsd" and self.jsd_beta is not None:
            raise ValueError("jsd_beta is used only with divergence: jsd; remove it or set divergence: jsd")
        return self


#: The OPCT divergence, chosen by ``kind``; each kind accepts only its own keys.
LossConfig = Annotated[
    Annotated[SampledLoss, Tag("sampled")] | Annotated[TopKLoss, Tag("topk")] | Annotated[FullLoss, Tag("full")],
    Discriminator(lambda v: v.get("kind", "sampled") if isinstance(v, dict) else getattr(v, "kind", None)),
]


class OPCTConfig(StrictSettings):
    """``method: opct``: fresh student samples on ``prompt`` every step, scored by the frozen teacher."""

    sampling: RolloutSettings = Field(description="the student's rollouts on prompt, fresh every step: n per pair (default 3), temperature 1")
    loss: LossConfig = Field(default_factory=SampledLoss, description="the divergence to the teacher, chosen by loss.kind")
    teacher_temperature: float = Field(
        1.0, gt=0.0, allow_inf_nan=False,
        description="divides the frozen teacher's logits before its log-softmax, in every loss kind: 1.0 = the "
                    "paper's teacher; below 1 a sharper target distribution, above 1 a flatter one",
    )
    rollout_logprobs: Literal["sampler", "recompute"] = Field(
        "sampler",
        description="the old (behaviour) log-probs of the sampled loss: sampler = those the sampler recorded (the "
                    "importance ratio then corrects for any sampler-trainer mismatch, untruncated); recompute = the "
                    "trainer's own forward, without gradient (see tis_cap). docs/training.md says which to use",
    )
    tis_cap: float | None = Field(
        None, ge=1.0, allow_inf_nan=False,
        description="truncated importance sampling: each token's loss is multiplied by min(pi_trainer / pi_sampler, "
                    "tis_cap) of the sampled token (rollout_logprobs: recompute, loss.kind: sampled); None: off",
    )

    @model_validator(mode="after")
    def _check_mismatch(self) -> OPCTConfig:
        if self.loss.kind != "sampled" and (self.rollout_logprobs != "sampler" or self.tis_cap is not None):
            raise ValueError(f"rollout_logprobs and tis_cap are for loss.kind: sampled (this loss is {self.loss.kind}, "
                             "which uses no importance ratio); remove them or set loss.kind: sampled")
        if self.tis_cap is not None and self.rollout_logprobs != "recompute":
            raise ValueError("tis_cap corrects the trainer's recomputed log-probs for the sampler's: set "
                             "rollout_logprobs: recompute with it (with the sampler's own log-probs the importance "
                             "ratio already corrects the whole mismatch, untruncated)")
        return self


class OPCTMethod:
    """On-policy consistency training, with fresh samples every step."""

    name: ClassVar[str] = "opct"
    config_class: ClassVar[type[OPCTConfig]] = OPCTConfig
    stats: ClassVar[dict[str, tuple[str, str]]] = SAMPLED_STATS
    logs_rollouts: ClassVar[bool] = True
    #: The student's samples are generated, teacher-scored and trained on, every step.
    compute: ClassVar[dict[str, str]] = {"generated": "trained", "teacher_scored": "trained"}

    @classmethod
    def check_launch(cls, cfg: RunConfig, *, processes: int, sharded: bool) -> None:
        """What the launch refuses of these settings (:func:`opct.training.launch_checks.check_launch`, the dry run's too)."""
        merge = cfg.train.merged_lora_sampling
        if merge is True and sharded:
            raise DistributionError("train.merged_lora_sampling needs whole weights; under FSDP it is not supported: "
                                    "set it to false (generation then runs on the gathered policy)")
        if cfg.method_config.sampling.engine == "vllm" and merge is True:
            raise ConfigError("train.merged_lora_sampling is for the hf engine (vllm merges the adapter itself): "
                              "set it to false, or opct.sampling.engine: hf")

    def __init__(self, ctx: TrainContext):
        self.ctx = ctx
        self.settings: OPCTConfig = ctx.cfg.method_config
        self.check_launch(ctx.cfg, processes=ctx.accelerator.num_processes, sharded=ctx.sharded)
        # train.merged_lora_sampling: decode with the adapter merged into a sampling copy (opct/sampling/merged_lora.py)
        merge = ctx.cfg.train.merged_lora_sampling
        # sampling.engine: vllm decodes in a colocated vLLM engine, which takes the policy's weights each step
        self.vllm = self.settings.sampling.engine == "vllm"
        self.merged = merged_sampling_copy(ctx.policy, merge, sharded=ctx.sharded, vllm=self.vllm)
        self.sampler = ctx.sampler(
            self.settings.sampling,
            self.merged.model if self.merged is not None else ctx.policy,
            share_prefix=ctx.cfg.train.share_prompt_prefix,
        )

    def setup(self, pairs: list[ConsistencyPair]) -> None:
        warn_if_off_policy(self.settings.sampling, self.name)

    def prepare(self, pairs: list[ConsistencyPair], step: int) -> list[Microbatch]:
        params = self.ctx.step_sampling(self.settings.sampling, step)
        if self.merged is not None:
            self.merged.refresh()  # the adapter after the last optimizer step
        if self.vllm:
            self.sampler.load_policy_weights(self.ctx.policy, self.ctx.gather)  # the policy after the last optimizer step
        rollouts = self.ctx.sample(self.sampler, pairs, params)
        return rollout_microbatches(pairs, rollouts, self.ctx.cfg.train.sequences_per_microbatch)

    def loss(self, mb: Microbatch) -> tuple[torch.Tensor, dict[str, float]]:
        loss, settings = self.settings.loss, self.settings
        s = score_pair(self.ctx, mb, reference_side="teacher_prompt", logit_rows=loss.kind != "sampled",
                       reference_temperature=settings.teacher_temperature)
        # s.student_lp, s.sampler_lp, s.reference_lp (the teacher at teacher_temperature), s.mask: [sequences, completion_len]
        if loss.kind == "sampled":
            # rollout_logprobs: recompute: the old log-probs are the trainer's forward without gradient. One
            # optimizer step per rollout batch, so that forward is this one's, detached: no second forward.
            old_lp = s.student_lp.detach() if settings.rollout_logprobs == "recompute" else s.sampler_lp
            per_token = losses.sampled_token_loss(
                s.student_lp,
                old_lp,
                s.reference_lp,
                s.mask,
                kl_coef=loss.kl_coef,
                discount=loss.kl_discount,
                kind=loss.policy_loss,
                clip_eps=loss.clip_eps or 0.0,
            )
            if settings.tis_cap is not None:
                per_token = per_token * losses.truncated_is_weights(old_lp, s.sampler_lp, s.mask, settings.tis_cap)
        else:
            chunk = self.ctx.cfg.train.logprob_chunk_positions
            if s.student_rows is not None and s.student_rows.head is not None:  # from hidden states
                chunk = logits_chunk_positions(self.ctx.cfg.train, s.student_rows.head.layer.out_features)
            with self.ctx.accelerator.autocast():  # the chunks' logits as the whole forward's would be
                if loss.kind == "topk":
                    per_token = losses.topk_reverse_kl(s.student_rows, s.reference_rows, s.mask.bool(), loss.topk, chunk,
                                                       loss.form)
                else:
                    per_token = losses.full_divergence(s.student_rows, s.reference_rows, s.mask.bool(), loss.divergence,
                                                       loss.jsd_beta or 0.5, chunk)
        return per_token.sum(), mb.sampled_stats(s)
