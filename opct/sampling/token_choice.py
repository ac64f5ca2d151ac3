"""How a sampler picks each row's next token from the model's raw logits, and the log-prob it records.

Shared by the plain and the static decoder (:mod:`opct.sampling.hf_sampler`,
:mod:`opct.sampling.static_decoder`), so that both draw the same tokens from the same logits.
"""

from __future__ import annotations

import torch

from opct.sampling.engine import SamplingParams


class TokenChooser:
    """Chooses each row's next token from the model's raw logits and records its log-probability.

    Sampling, temperature, top-p and the minimum length are all decided here, from
    :class:`SamplingParams` alone: no logits processor of the model's ``generation_config``
    (repetition penalty, top-k, n-gram blocking...) ever runs, so the recorded log-probs are those
    of the policy the tokens were drawn from (see :class:`Rollout` for which policy that is). Each
    row draws its uniforms for every step up front from its own generator, and a step samples all
    rows at once by inverting their cumulative distributions, so a sample does not depend on the
    rest of the batch.
    """

    def __init__(self, params: SamplingParams, generators: list[torch.Generator], eos_ids: list[int]):
        self.params = params
        self.uniforms = torch.stack(
            [torch.rand(params.max_new_tokens, generator=g, dtype=torch.float64) for g in generators]
        )
        self.eos_ids = torch.tensor(eos_ids)
        self.tokens: list[torch.Tensor] = []
        self.logprobs: list[torch.Tensor] = []

    def __call__(self, logits: torch.Tensor, step: int) -> torch.Tensor:
        """The next token of every row (``logits``: ``[rows, vocab]`` at decoding step ``step``)."""
        raw = logits.float()
        logp = torch.log_softmax(raw, dim=-1)
        choice_logits = raw
        if step < self.params.min_new_tokens:
            choice_logits = raw.clone()
            self.eos_ids = self.eos_ids.to(raw.device)
            choice_logits[:, self.eos_ids] = float("-inf")
        if self.params.temperature == 0.0:
            chosen = choice_logits.argmax(dim=-1)
        else:
            probs = torch.softmax(choice_logits / self.params.temperature, dim=-1)
            if self.params.top_p < 1.0:
                probs = top_p_filter(probs, self.params.top_p)
            self.uniforms = self.uniforms.to(raw.device)
            chosen = inverse_cdf(probs, self.uniforms[:, step])
        self.tokens.append(chosen)
        self.logprobs.append(logp.gather(1, chosen[:, None])[:, 0])
        return chosen


def inverse_cdf(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Row ``i``'s token ``t`` with ``cdf[t-1] <= u_i * total < cdf[t]``: a draw from ``probs[i]``.

    Tokens of probability zero are never chosen (an empty interval; the clamp covers rounding at
    the top end).
    """
    cdf = probs.double().cumsum(-1)
    chosen = torch.searchsorted(cdf, (uniforms * cdf[:, -1])[:, None], right=True)[:, 0]
    # Below the top end every chosen interval is non-empty (cdf[t] > cdf[t-1], so probs[t] > 0, t <= the last
    # possible token); only ``u * total`` rounding up to ``total`` lands past the last token, and the clamp maps
    # it to the last possible one: the last t with probs[t] > 0. Done on every row, on the device: asking first
    # whether it is needed would be a host sync per token. A row of non-finite probabilities (a diverged model)
    # has no possible token and gets token 0, as before, never an index past the vocabulary. The last possible
    # token is the argmax of a rising ramp over the possible ones (float32 counts exactly to 2^24, past any
    # vocabulary): one product and one reduction, where an int64 running count over the vocabulary was a scan.
    ramp = torch.arange(1, probs.shape[-1] + 1, device=probs.device, dtype=torch.float32)
    last_possible = ((probs > 0) * ramp).argmax(-1)
    return torch.minimum(chosen, last_possible)


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """``probs`` with each row kept to its smallest top set of mass ``top_p`` (the rest zero), renormalised."""
    sorted_p, idx = probs.sort(dim=-1, descending=True)
    keep = sorted_p.cumsum(-1) - sorted_p < top_p
    kept = torch.zeros_like(probs).scatter(1, idx, sorted_p * keep)
    return kept / kept.sum(-1, keepdim=True)
