"""Statistical test: the sampled-token loss is an unbiased estimator of the right gradient.

A tiny random Llama (vocabulary 5), completions of fixed length 3: all 125 completions can be
enumerated, so the exact sequence-level reverse KL and its gradient are known. Completions are then
drawn from the student by Monte Carlo and the sampled-token loss's gradient is averaged.

* ``kl_discount = 1`` (advantage = -sum of future log-ratios): the expected gradient equals the
  gradient of KL(pi_theta(.|x) || pi_teacher(.|x')).
* ``kl_discount = 0`` (the paper's default): it equals the expected gradient of the per-position
  full-vocabulary reverse KL on on-policy prefixes (``losses.full_divergence``), and differs from
  the sequence-level gradient.

Tolerance: with M samples the Monte Carlo mean has per-coordinate standard error
SE_i = sd_i / sqrt(M), computed exactly from the enumeration. The test asserts
||g_mc - g_exact||_2 <= 4 * sqrt(sum_i SE_i^2), and cosine(g_mc, g_exact) >= 0.95.
"""

import itertools

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from opct.methods import losses
from opct.sampling.scoring import CompletionBatch, completion_logits, token_logprobs

V, T, M = 5, 3, 40_000
STUDENT_PROMPT, TEACHER_PROMPT = [0, 1, 2], [3, 1]


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=16, initializer_range=0.6, pad_token_id=0, bos_token_id=None, eos_token_id=None,
    )
    model = LlamaForCausalLM(cfg).double()
    completions = [list(c) for c in itertools.product(range(V), repeat=T)]
    student = CompletionBatch(prompts=[STUDENT_PROMPT], completions=completions, prompt_of=[0] * len(completions))
    teacher = CompletionBatch(prompts=[TEACHER_PROMPT], completions=completions, prompt_of=[0] * len(completions))
    targets, mask = student.targets_and_mask()
    with torch.no_grad():
        t_logits = completion_logits(model, teacher, pad_id=0)
        t_lp = token_logprobs(t_logits, targets)
    return model, student, targets, mask, t_logits, t_lp


def _flat_grad(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def _per_sequence_grads(model, student, targets, mask, t_lp, discount):
    """Gradient of the sampled-token loss for each of the 125 completions (sampler == student)."""
    grads = []
    for i in range(len(student.completions)):
        model.zero_grad()
        one = CompletionBatch(prompts=student.prompts, completions=[student.completions[i]], prompt_of=[0])
        lp = token_logprobs(completion_logits(model, one, pad_id=0), targets[i : i + 1])
        loss = losses.sampled_token_loss(lp, lp.detach(), t_lp[i : i + 1], mask[i : i + 1].double(), discount=discount)
        loss.sum().backward()
        grads.append(_flat_grad(model).clone())
    return torch.stack(grads)


def _student_probs(model, student, targets):
    with torch.no_grad():
        lp = token_logprobs(completion_logits(model, student, pad_id=0), targets)
    return lp.sum(-1).exp()


def _monte_carlo(per_seq, probs, seed):
    counts = torch.bincount(torch.multinomial(probs, M, replacement=True, generator=torch.Generator().manual_seed(seed)), minlength=len(probs))
    g_mc = (counts.double()[:, None] * per_seq).sum(0) / M
    mean = (probs[:, None] * per_seq).sum(0)
    var = (probs[:, None] * (per_seq - mean) ** 2).sum(0)
    return g_mc, mean, (var / M).sum().sqrt()


def _sequence_kl_grad(model, student, targets, t_lp):
    model.zero_grad()
    lp = token_logprobs(completion_logits(model, student, pad_id=0), targets).sum(-1)
    (lp.exp() * (lp - t_lp.sum(-1))).sum().backward()
    return _flat_grad(model).clone()


def _per_position_kl_grad(model, student, targets, mask, t_logits):
    model.zero_grad()
    logits = completion_logits(model, student, pad_id=0)
    weights = token_logprobs(logits, targets).sum(-1).exp().detach()
    per_pos = losses.full_divergence(logits, t_logits, mask, "reverse_kl")
    (weights[:, None] * per_pos).sum().backward()
    return _flat_grad(model).clone()


def _cos(a, b):
    return float(a @ b / (a.norm() * b.norm()))


def test_full_future_sum_gives_sequence_reverse_kl_gradient(setup):
    model, student, targets, mask, _, t_lp = setup
    probs = _student_probs(model, student, targets)
    assert abs(float(probs.sum()) - 1.0) < 1e-9
    exact = _sequence_kl_grad(model, student, targets, t_lp)
    per_seq = _per_sequence_grads(model, student, targets, mask, t_lp, discount=1.0)
    g_mc, expectation, se = _monte_carlo(per_seq, probs, seed=1)
    # exact identity, up to float32 rounding (Llama RMSNorm computes in float32 even in a float64 model)
    torch.testing.assert_close(expectation, exact, rtol=1e-4, atol=1e-5)
    assert (g_mc - exact).norm() <= 4 * se, f"MC error {(g_mc - exact).norm():.3e} > 4 x SE {se:.3e}"
    assert _cos(g_mc, exact) >= 0.95


def test_no_discount_gives_per_position_kl_gradient(setup):
    model, student, targets, mask, t_logits, t_lp = setup
    probs = _student_probs(model, student, targets)
    exact = _per_position_kl_grad(model, student, targets, mask, t_logits)
    per_seq = _per_sequence_grads(model, student, targets, mask, t_lp, discount=0.0)
    g_mc, expectation, se = _monte_carlo(per_seq, probs, seed=2)
    torch.testing.assert_close(expectation, exact, rtol=1e-4, atol=1e-5)
    assert (g_mc - exact).norm() <= 4 * se
    assert _cos(g_mc, exact) >= 0.95
    # ...and it is a different estimator from the sequence-level one: the test can tell them apart.
    seq = _sequence_kl_grad(model, student, targets, t_lp)
    assert (g_mc - seq).norm() > 8 * se
