"""Every loss against a brute-force reference written with explicit loops."""

import math

import pytest
import torch

from opct.methods import losses

torch.manual_seed(0)
N, L, V = 3, 5, 7


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(1)
    s_logits = torch.randn(N, L, V, generator=g) * 2
    t_logits = torch.randn(N, L, V, generator=g) * 2
    targets = torch.randint(0, V, (N, L), generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.float32)
    s_lp = torch.log_softmax(s_logits, -1).gather(-1, targets[..., None])[..., 0]
    t_lp = torch.log_softmax(t_logits, -1).gather(-1, targets[..., None])[..., 0]
    sampler_lp = s_lp + 0.05 * torch.randn(N, L, generator=g)
    return s_logits, t_logits, targets, mask, s_lp, t_lp, sampler_lp


def _ref_advantages(sampler_lp, teacher_lp, mask, coef, gamma):
    out = torch.zeros(N, L)
    for i in range(N):
        for t in range(L):
            if not mask[i, t]:
                continue
            total = 0.0
            for s in range(t, L):
                if mask[i, s]:
                    total += gamma ** (s - t) * -(coef * (sampler_lp[i, s] - teacher_lp[i, s]).item())
            out[i, t] = total if gamma > 0 else -(coef * (sampler_lp[i, t] - teacher_lp[i, t]).item())
    return out


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0])
def test_kl_advantages(data, gamma):
    *_, mask, _, t_lp, sampler_lp = data
    got = losses.kl_advantages(sampler_lp, t_lp, mask, kl_coef=0.7, discount=gamma)
    torch.testing.assert_close(got, _ref_advantages(sampler_lp, t_lp, mask, 0.7, gamma), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["importance_sampling", "ppo"])
def test_sampled_token_loss_value_and_gradient(data, kind):
    *_, mask, s_lp, t_lp, sampler_lp = data
    student = s_lp.clone().requires_grad_(True)
    got = losses.sampled_token_loss(student, sampler_lp, t_lp, mask, kl_coef=1.3, discount=0.0, kind=kind, clip_eps=0.02)
    got.sum().backward()
    ref_student = s_lp.clone().requires_grad_(True)
    total = 0.0
    for i in range(N):
        for t in range(L):
            if not mask[i, t]:
                continue
            adv = -1.3 * (sampler_lp[i, t] - t_lp[i, t]).item()
            ratio = torch.exp(ref_student[i, t] - sampler_lp[i, t].item())
            if kind == "importance_sampling":
                total = total - ratio * adv
            else:
                r = ratio.item()
                inside = 0.98 <= r <= 1.02
                clipped = min(max(r, 0.98), 1.02)
                use_unclipped = inside or r * adv < clipped * adv
                total = total - (ratio * adv if use_unclipped else torch.tensor(clipped * adv))
    total.backward()
    torch.testing.assert_close(got.sum(), total.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(student.grad, ref_student.grad, rtol=1e-5, atol=1e-6)
    assert (got[mask == 0] == 0).all()


def test_on_policy_importance_gradient_is_score_times_advantage(data):
    """With sampler == student the IS loss's gradient is -A * grad log p (REINFORCE)."""
    *_, mask, s_lp, t_lp, _ = data
    student = s_lp.clone().requires_grad_(True)
    losses.sampled_token_loss(student, s_lp, t_lp, mask).sum().backward()
    torch.testing.assert_close(student.grad, (s_lp - t_lp) * mask)


def _ref_div(s_logits, t_logits, mask, fn):
    out = torch.zeros(N, L)
    for i in range(N):
        for t in range(L):
            if mask[i, t]:
                ps, pt = torch.softmax(s_logits[i, t].double(), -1), torch.softmax(t_logits[i, t].double(), -1)
                out[i, t] = fn(ps, pt)
    return out


def _kl(p, q):
    return sum(p[v] * math.log(p[v] / q[v]) for v in range(len(p)))


@pytest.mark.parametrize("chunk", [1, 4, 1000])
@pytest.mark.parametrize("divergence", ["reverse_kl", "forward_kl", "jsd"])
def test_full_divergences(data, divergence, chunk):
    s_logits, t_logits, _, mask, *_ = data
    beta = 0.3

    def ref(ps, pt):
        if divergence == "reverse_kl":
            return _kl(ps, pt)
        if divergence == "forward_kl":
            return _kl(pt, ps)
        m = beta * pt + (1 - beta) * ps
        return beta * _kl(pt, m) + (1 - beta) * _kl(ps, m)

    got = losses.full_divergence(s_logits, t_logits, mask.bool(), divergence, beta=beta, chunk_size=chunk)
    torch.testing.assert_close(got, _ref_div(s_logits, t_logits, mask, ref).float(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("k", [1, 3, V])
def test_topk_reverse_kl(data, k):
    s_logits, t_logits, _, mask, *_ = data

    def ref(ps, pt):
        top = sorted(range(V), key=lambda v: -ps[v])[:k]
        return sum(ps[v] * math.log(ps[v] / pt[v]) for v in top)

    got = losses.topk_reverse_kl(s_logits, t_logits, mask.bool(), k=k, chunk_size=2)
    torch.testing.assert_close(got, _ref_div(s_logits, t_logits, mask, ref).float(), rtol=1e-4, atol=1e-6)
    if k == V:
        full = losses.full_divergence(s_logits, t_logits, mask.bool(), "reverse_kl")
        torch.testing.assert_close(got, full)


@pytest.mark.parametrize("k", [1, 3, V])
@pytest.mark.parametrize("form", ["renormalised", "tail"])
def test_topk_reverse_kl_in_trls_forms(data, k, form):
    """TRL SDFT's two meanings of top-k: both sides renormalised over the student's top k, or the top k plus one
    bucket holding each side's remaining mass. At k = V both are the full reverse KL (the tail is empty)."""
    s_logits, t_logits, _, mask, *_ = data

    def ref(ps, pt):
        top = sorted(range(V), key=lambda v: -ps[v])[:k]
        qs, qt = [ps[v] for v in top], [pt[v] for v in top]
        if form == "renormalised":
            qs, qt = [q / sum(qs) for q in qs], [q / sum(qt) for q in qt]
        else:
            qs, qt = [*qs, 1 - sum(qs)], [*qt, 1 - sum(qt)]
        return sum(a * math.log(a / b) for a, b in zip(qs, qt, strict=True) if a > 1e-12)

    got = losses.topk_reverse_kl(s_logits, t_logits, mask.bool(), k=k, chunk_size=2, form=form)
    torch.testing.assert_close(got, _ref_div(s_logits, t_logits, mask, ref).float(), rtol=1e-4, atol=1e-5)
    if k == V:
        torch.testing.assert_close(got, losses.full_divergence(s_logits, t_logits, mask.bool(), "reverse_kl"),
                                   rtol=1e-4, atol=1e-5)
    if k == 1 and form == "renormalised":  # one token renormalised is certain on both sides: nothing to learn
        assert torch.count_nonzero(got) == 0


def test_the_tail_form_has_finite_gradients_when_the_top_k_is_the_whole_vocabulary(data):
    s_logits, t_logits, _, mask, *_ = data
    s = s_logits.clone().requires_grad_(True)
    losses.topk_reverse_kl(s, t_logits, mask.bool(), k=V, form="tail").sum().backward()
    assert torch.isfinite(s.grad).all() and torch.count_nonzero(s.grad) > 0


def test_an_unknown_topk_form_is_refused(data):
    s_logits, t_logits, _, mask, *_ = data
    with pytest.raises(ValueError, match="unknown top-k form 'both'"):
        losses.topk_reverse_kl(s_logits, t_logits, mask.bool(), form="both")


def test_chunked_gradients_match_unchunked(data):
    s_logits, t_logits, _, mask, *_ = data
    grads = []
    for chunk in (1, 5, 1000):
        s = s_logits.clone().requires_grad_(True)
        losses.full_divergence(s, t_logits, mask.bool(), "jsd", beta=0.5, chunk_size=chunk).sum().backward()
        grads.append(s.grad)
    torch.testing.assert_close(grads[0], grads[2])
    torch.testing.assert_close(grads[1], grads[2])
    assert grads[2][mask == 0].abs().sum() == 0


def test_token_logprobs_matches_log_softmax(data):
    from opct.sampling.scoring import token_logprobs

    s_logits, _, targets, *_ = data
    ref = torch.log_softmax(s_logits, -1).gather(-1, targets[..., None])[..., 0]
    torch.testing.assert_close(token_logprobs(s_logits, targets, chunk_size=4), ref)


@pytest.mark.parametrize("chunk", [1, 4, 1000])
def test_token_logprobs_gradient_is_exact(chunk):
    from opct.sampling.scoring import token_logprobs

    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 11, (3, 5))
    assert torch.autograd.gradcheck(lambda x: token_logprobs(x, targets, chunk), (logits,))
    weights = torch.randn(3, 5, dtype=torch.float64)
    (token_logprobs(logits, targets, chunk) * weights).sum().backward()
    want = torch.autograd.grad((torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0] * weights).sum(), logits)[0]
    torch.testing.assert_close(logits.grad, want)


def test_token_logprobs_of_bf16_logits_are_float32_and_grads_keep_the_dtype():
    from opct.sampling.scoring import token_logprobs

    torch.manual_seed(0)
    logits = torch.randn(2, 4, 50).to(torch.bfloat16).requires_grad_(True)
    targets = torch.randint(0, 50, (2, 4))
    lp = token_logprobs(logits, targets, chunk_size=3)
    assert lp.dtype == torch.float32
    ref = torch.log_softmax(logits.float(), -1).gather(-1, targets[..., None])[..., 0]
    torch.testing.assert_close(lp, ref)
    lp.sum().backward()
    assert logits.grad.dtype == torch.bfloat16


def test_bad_options_raise(data):
    s_logits, t_logits, _, mask, *_ = data
    with pytest.raises(ValueError, match="0 < beta < 1"):
        losses.full_divergence(s_logits, t_logits, mask.bool(), "jsd", beta=0.0)
    with pytest.raises(ValueError, match="unknown divergence"):
        losses.full_divergence(s_logits, t_logits, mask.bool(), "tv")
    with pytest.raises(ValueError, match="unknown policy loss"):
        losses.policy_gradient_loss(mask, mask, mask, mask, kind="dpo")
