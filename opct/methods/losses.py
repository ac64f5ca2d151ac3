r"""Divergences between the student (on ``prompt``) and the frozen teacher (on ``teacher_prompt``).

All functions return per-token values ``[N, L]`` (zero where ``mask`` is false); the training loop
sums them and divides by the number of completion tokens in the global batch.

The objective of arXiv 2605.21834, for a completion ``y`` sampled from the student on
the perturbed prompt ``x`` and scored by the teacher on the contrastive prompt ``x'``:

.. math::

    \mathrm{kl}_t = \log \pi_{\text{sampler}}(y_t \mid x, y_{<t}) - \log \pi_{\text{teacher}}(y_t \mid x', y_{<t})

    A_t = -\beta \sum_{s \ge t} \gamma^{s-t}\, \mathrm{kl}_s \qquad (\gamma = 0: A_t = -\beta\,\mathrm{kl}_t)

    \mathcal{L} = -\sum_t \frac{\pi_\theta(y_t \mid x, y_{<t})}{\mathrm{sg}[\pi_{\text{sampler}}(y_t \mid x, y_{<t})]}\, A_t

With ``opct.rollout_logprobs: recompute`` the old log-probs :math:`\pi_{\text{sampler}}` above are the
trainer's own (no gradient), and ``opct.tis_cap`` :math:`C` multiplies each token's loss by the truncated
importance weight :math:`w_t = \min(\pi_{\text{trainer}}(y_t) / \pi_{\text{sampler}}(y_t), C)`
(:func:`truncated_is_weights`), the sampler being the engine that drew the tokens.

With ``gamma = 1`` the expected gradient is that of the sequence-level reverse KL
``KL(pi_theta(.|x) || pi_teacher(.|x'))``; with ``gamma = 0`` (the paper's default) it is the
gradient of the per-position reverse KL on on-policy prefixes, i.e. of :func:`full_divergence`.

Temperature and top-p. ``pi_sampler`` is always the model's own distribution at temperature 1 over
the whole vocabulary (the recorded log-prob of :class:`opct.sampling.engine.Rollout`), as in the official
local trainer, which recomputes the sampling log-probs as ``log_softmax`` of the raw logits. Sampling
at ``T != 1`` or with top-p draws the tokens from another distribution, so the ratio and the KL then
refer to the untempered policy on tokens it did not itself draw; a run with such settings says so
once, at start (:class:`opct.methods.base.OffPolicySamplingWarning`).
"""

from __future__ import annotations

import math

import torch

from opct.sampling.logit_rows import LogitRows, as_logit_rows, map_position_chunks


def kl_advantages(
    sampler_logprobs: torch.Tensor,
    teacher_logprobs: torch.Tensor,
    mask: torch.Tensor,
    kl_coef: float = 1.0,
    discount: float = 0.0,
) -> torch.Tensor:
    """Per-token advantages ``A_t = -kl_coef * sum_{s>=t} discount^(s-t) kl_s`` (no gradient)."""
    kl = (sampler_logprobs - teacher_logprobs).detach() * mask
    adv = -kl_coef * kl
    if discount > 0.0:
        out = torch.zeros_like(adv)
        running = torch.zeros_like(adv[:, 0])
        for t in range(adv.shape[1] - 1, -1, -1):
            running = adv[:, t] + discount * running
            out[:, t] = running
        adv = out
    return adv * mask


def policy_gradient_loss(
    student_logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    kind: str = "importance_sampling",
    clip_eps: float = 0.2,
) -> torch.Tensor:
    """Importance-sampled policy-gradient loss per token: ``-(pi_theta / sg[pi_sampler]) * A``.

    ``kind="ppo"`` uses the clipped surrogate ``-min(r A, clip(r, 1-eps, 1+eps) A)``.
    """
    ratio = torch.exp(student_logprobs - sampler_logprobs.detach())
    adv = advantages.detach()
    if kind == "importance_sampling":
        loss = -ratio * adv
    elif kind == "ppo":
        loss = -torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv)
    else:
        raise ValueError(f"unknown policy loss {kind!r}; use 'importance_sampling' or 'ppo'")
    return loss * mask


def sampled_token_loss(
    student_logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    teacher_logprobs: torch.Tensor,
    mask: torch.Tensor,
    kl_coef: float = 1.0,
    discount: float = 0.0,
    kind: str = "importance_sampling",
    clip_eps: float = 0.2,
) -> torch.Tensor:
    """The paper's OPCT loss per token (see the module docstring)."""
    adv = kl_advantages(sampler_logprobs, teacher_logprobs, mask, kl_coef, discount)
    return policy_gradient_loss(student_logprobs, sampler_logprobs, adv, mask, kind, clip_eps)


def truncated_is_weights(
    trainer_logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, mask: torch.Tensor, cap: float
) -> torch.Tensor:
    """Truncated importance-sampling weights per token (no gradient): ``w_t = min(pi_trainer(y_t) / pi_sampler(y_t), C)``.

    The rollouts come from the sampler's distribution; the loss is the trainer's. Multiplying each token's
    loss by ``w_t`` corrects for the difference, truncated at ``C`` so that a token the sampler found far
    less likely than the trainer does cannot dominate the step (truncated IS, as verl and ms-swift apply it
    to the recomputed old log-probs).
    """
    return torch.exp((trainer_logprobs - sampler_logprobs).detach()).clamp(max=cap) * mask


def group_advantages(rewards: torch.Tensor, group_size: int, min_std: float = 1e-6) -> torch.Tensor:
    """GRPO advantages: each reward standardised within its group of ``group_size`` consecutive samples.

    ``A_i = (r_i - mean_g) / std_g`` with the unbiased (n - 1) standard deviation, as in TRL's GRPO.
    A group whose std is below ``min_std`` (all rewards equal) carries no signal: its advantages are 0.
    """
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    r = rewards.reshape(-1, group_size).to(torch.float64)
    mean = r.mean(dim=1, keepdim=True)
    std = r.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(mean)
    adv = torch.where(std > min_std, (r - mean) / std.clamp(min=min_std), torch.zeros_like(r))
    return adv.reshape(-1).to(rewards.dtype if rewards.is_floating_point() else torch.float32)


def k3_kl(student_logprobs: torch.Tensor, reference_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL to the reference on sampled tokens: ``exp(d) - d - 1`` with ``d = log p_ref - log p_theta``.

    Non-negative per token. Used as a loss term on on-policy samples (as in DeepSeekMath's GRPO) its
    expected gradient is that of ``KL(p_ref || p_theta)``; it pulls the policy back to the reference.
    """
    d = reference_logprobs.detach() - student_logprobs
    return (torch.exp(d) - d - 1.0) * mask


def _up(x: torch.Tensor) -> torch.Tensor:
    """Work in at least float32 (float64 stays float64)."""
    return x if x.dtype == torch.float64 else x.float()


def _reverse_kl(s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    ls, lt = torch.log_softmax(_up(s), -1), torch.log_softmax(_up(t), -1)
    return (ls.exp() * (ls - lt)).sum(-1)


def _forward_kl(s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    ls, lt = torch.log_softmax(_up(s), -1), torch.log_softmax(_up(t), -1)
    return (lt.exp() * (lt - ls)).sum(-1)


def _jsd(beta: float):
    def jsd(s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        ls, lt = torch.log_softmax(_up(s), -1), torch.log_softmax(_up(t), -1)
        lm = torch.logsumexp(torch.stack([lt + math.log(beta), ls + math.log(1.0 - beta)]), dim=0)
        return beta * (lt.exp() * (lt - lm)).sum(-1) + (1.0 - beta) * (ls.exp() * (ls - lm)).sum(-1)

    return jsd


#: What "top-k" means (``opct.loss.form``): ``partial``, the top-k terms of the full reverse KL (opct's
#: default); ``renormalised``, the reverse KL of the two distributions renormalised over the student's top-k
#: tokens; ``tail``, over those tokens plus one bucket holding each side's remaining mass (TRL SDFT's
#: ``distillation_add_tail``). docs/training.md compares the peers' meanings.
TOPK_FORMS = ("partial", "renormalised", "tail")


def _with_tail(log_probs: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The log-probabilities at ``idx`` and one more entry, the log of the mass outside it: summed over the
    other tokens rather than taken as ``1 − mass``, so it is exact (``−inf`` when ``idx`` is every token)."""
    rest = torch.logsumexp(log_probs.scatter(-1, idx, -math.inf), dim=-1, keepdim=True)
    return torch.cat([log_probs.gather(-1, idx), rest], dim=-1)


def _kl_terms(ls: torch.Tensor, lt: torch.Tensor) -> torch.Tensor:
    """``sum p_s (log p_s − log p_t)`` over the last axis, a term of zero student mass counting 0."""
    return torch.where(ls > -math.inf, ls.exp() * (ls - lt), torch.zeros_like(ls)).sum(-1)


def _topk_reverse_kl(k: int, form: str = "partial"):
    if form not in TOPK_FORMS:
        raise ValueError(f"unknown top-k form {form!r}; use one of {', '.join(TOPK_FORMS)}")

    def topk_kl(s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        ls, lt = torch.log_softmax(_up(s), -1), torch.log_softmax(_up(t), -1)
        idx = ls.detach().topk(min(k, ls.shape[-1]), dim=-1).indices
        lsk, ltk = ls.gather(-1, idx), lt.gather(-1, idx)
        if form == "partial":
            return (lsk.exp() * (lsk - ltk)).sum(-1)
        if form == "renormalised":
            lsk = lsk - torch.logsumexp(lsk, dim=-1, keepdim=True)
            ltk = ltk - torch.logsumexp(ltk, dim=-1, keepdim=True)
        elif form == "tail":
            lsk, ltk = _with_tail(ls, idx), _with_tail(lt, idx)
        return _kl_terms(lsk, ltk)

    return topk_kl


def _per_position(fn, student: torch.Tensor | LogitRows, teacher: torch.Tensor | LogitRows, mask: torch.Tensor,
                  chunk_size: int) -> torch.Tensor:
    """``fn(student logits, teacher logits)`` at each masked position as ``[N, L]``, ``chunk_size`` positions at a
    time (:func:`opct.sampling.logit_rows.map_position_chunks`): from whole logits, or from hidden states and
    the output head, the teacher's side without gradients."""
    s, t = as_logit_rows(student), as_logit_rows(teacher)
    positions = mask.reshape(-1).nonzero()[:, 0].to(s.device)

    def chunk_values(chunk: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            t_logits = t.take(chunk.to(t.device)).to(s.device)
        return fn(s.take(chunk), t_logits)

    values = map_position_chunks(chunk_values, positions, chunk_size, needs_grad=s.requires_grad)
    n, length = s.shape
    out = torch.zeros(n * length, dtype=values.dtype, device=s.device)
    out = out.index_put((positions,), values)
    return out.reshape(n, length)


def full_divergence(
    student_logits: torch.Tensor | LogitRows,
    teacher_logits: torch.Tensor | LogitRows,
    mask: torch.Tensor,
    divergence: str = "reverse_kl",
    beta: float = 0.5,
    chunk_size: int = 512,
) -> torch.Tensor:
    """Vocabulary-wide divergence per completion position.

    ``reverse_kl``: KL(p_student || p_teacher); ``forward_kl``: KL(p_teacher || p_student);
    ``jsd``: generalized Jensen-Shannon, ``beta KL(p_t || m) + (1-beta) KL(p_s || m)`` with
    ``m = beta p_t + (1-beta) p_s`` (``beta = 0.5`` is the symmetric JSD). Computed only at masked
    positions, ``chunk_size`` positions at a time; the logits are whole ``[N, L, V]`` tensors or
    :class:`~opct.sampling.logit_rows.LogitRows` (hidden states and the output head).
    """
    fns = {"reverse_kl": _reverse_kl, "forward_kl": _forward_kl}
    if divergence == "jsd":
        if not 0.0 < beta < 1.0:
            raise ValueError("jsd needs 0 < beta < 1; use reverse_kl or forward_kl for the end points")
        fn = _jsd(beta)
    elif divergence in fns:
        fn = fns[divergence]
    else:
        raise ValueError(f"unknown divergence {divergence!r}; use reverse_kl, forward_kl or jsd")
    return _per_position(fn, student_logits, teacher_logits, mask, chunk_size)


def topk_reverse_kl(
    student_logits: torch.Tensor | LogitRows,
    teacher_logits: torch.Tensor | LogitRows,
    mask: torch.Tensor,
    k: int = 20,
    chunk_size: int = 512,
    form: str = "partial",
) -> torch.Tensor:
    """Reverse KL restricted to the student's top-``k`` tokens ``K`` at each position, in one of :data:`TOPK_FORMS`.

    ``partial``: ``sum_{i in K} p_s(i) (log p_s(i) - log p_t(i))``, both distributions normalised over
    the full vocabulary (the top-k mass is not renormalised). ``renormalised``: the same sum with ``p_s``
    and ``p_t`` each renormalised over ``K``. ``tail``: over ``K`` plus one bucket holding ``1 - p(K)`` on
    each side. The set ``K`` carries no gradient.
    """
    return _per_position(_topk_reverse_kl(k, form), student_logits, teacher_logits, mask, chunk_size)
