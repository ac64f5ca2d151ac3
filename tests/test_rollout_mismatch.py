"""The sampler-trainer mismatch options of OPCT's sampled loss, against hand computations: the old log-probs
recomputed with the trainer's forward (``opct.rollout_logprobs: recompute``), truncated importance sampling
(``opct.tis_cap``), the mismatch statistic; and the chunked scoring path through ``OPCTMethod.loss``."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import run_config

from opct.config import RunConfig
from opct.methods import losses

PROMPT = [{"role": "user", "content": "What is the capital of Zarnia? I think it is Velmora."}]
CLEAN = [{"role": "user", "content": "What is the capital of Zarnia?"}]


def test_truncated_importance_weights_by_hand():
    trainer = torch.tensor([[-1.0, -2.0, -0.5, -3.0]])
    sampler = torch.tensor([[-1.2, -1.0, -0.5, -0.1]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    # exp(0.2) = 1.2214 -> capped at 1.1; exp(-1) = 0.3679; exp(0) = 1; masked -> 0
    want = torch.tensor([[1.1, math.exp(-1.0), 1.0, 0.0]])
    torch.testing.assert_close(losses.truncated_is_weights(trainer, sampler, mask, cap=1.1), want)


def test_recomputed_old_logprobs_with_tis_loss_and_gradient_by_hand():
    """With old = sg(trainer), gamma 0, beta 1: L = sum_t w_t (log pi_t - log pi_teacher,t) in value and
    dL/dlog pi_t = w_t (log pi_t - log pi_teacher,t) (the ratio's gradient at 1), w_t = min(pi_t / pi_sampler,t, C)."""
    student = torch.tensor([[-0.5, -1.5, -2.0]], dtype=torch.float64, requires_grad=True)
    teacher = torch.tensor([[-0.7, -1.0, -2.5]], dtype=torch.float64)
    sampler = torch.tensor([[-0.6, -2.5, -1.0]], dtype=torch.float64)
    mask = torch.ones(1, 3, dtype=torch.float64)
    old = student.detach()
    per_token = losses.sampled_token_loss(student, old, teacher, mask)
    per_token = per_token * losses.truncated_is_weights(old, sampler, mask, cap=2.0)
    # w = [min(e^0.1, 2), min(e^1.0, 2), min(e^-1.0, 2)] = [1.10517, 2, 0.36788]; kl = [0.2, -0.5, 0.5]
    w = [math.exp(0.1), 2.0, math.exp(-1.0)]
    kl = [0.2, -0.5, 0.5]
    assert float(per_token.detach().sum()) == pytest.approx(sum(a * b for a, b in zip(w, kl, strict=True)), rel=1e-12)
    (grad,) = torch.autograd.grad(per_token.sum(), student)
    torch.testing.assert_close(grad, torch.tensor([[a * b for a, b in zip(w, kl, strict=True)]], dtype=torch.float64))


def test_the_sampler_default_keeps_the_untruncated_importance_ratio():
    """The default (the sampler's own log-probs): the ratio pi_theta / pi_sampler, untruncated, and kl from the sampler."""
    student = torch.tensor([[-0.5]], dtype=torch.float64, requires_grad=True)
    teacher, sampler = torch.tensor([[-0.7]], dtype=torch.float64), torch.tensor([[-2.5]], dtype=torch.float64)
    loss = losses.sampled_token_loss(student, sampler, teacher, torch.ones(1, 1, dtype=torch.float64))
    # ratio e^{2.0}, advantage -(-2.5 + 0.7) = 1.8: loss -e^2 * 1.8
    assert float(loss) == pytest.approx(-math.exp(2.0) * 1.8, rel=1e-12)


@pytest.mark.parametrize(("opct", "match"), [
    ({"tis_cap": 2.0}, "set rollout_logprobs: recompute"),
    ({"loss": {"kind": "full"}, "rollout_logprobs": "recompute"}, "for loss.kind: sampled"),
    ({"rollout_logprobs": "recompute", "tis_cap": 0.5}, "greater than or equal to 1"),
])
def test_mismatch_options_refuse_what_does_not_apply(tiny_model, tmp_path, opct, match):
    tree = run_config(tiny_model, tmp_path / "p.jsonl", tmp_path, **{f"opct.{k}": v for k, v in opct.items()})
    with pytest.raises(ValueError, match=match):
        RunConfig.model_validate(tree)


def _context(tiny_model, tmp_path, dtype: torch.dtype = torch.float32, **overrides):
    from accelerate import Accelerator

    from opct.methods.base import TrainContext
    from opct.models import load_model, load_tokenizer, make_teacher

    cfg = RunConfig.model_validate(run_config(tiny_model, tmp_path / "unused.jsonl", tmp_path, finetune="full", **overrides))
    model = load_model(cfg.model).to(dtype)
    return TrainContext(cfg=cfg, accelerator=Accelerator(cpu=True), model=model, policy=model,
                        tokenizer=load_tokenizer(str(tiny_model)), teacher=make_teacher(model), run_dir=tmp_path)


def _microbatch(ctx, method, shift: float):
    """Three samples of one pair; the recorded sampler log-probs moved by ``shift`` on every other token."""
    from opct.methods.base import Microbatch
    from opct.pairs import ConsistencyPair
    from opct.sampling.engine import SamplingParams

    pair = ConsistencyPair("p", PROMPT, CLEAN)
    rollouts = ctx.sample(method.sampler, [pair], SamplingParams(n=3, temperature=1.0, max_new_tokens=8, seed=4))
    sampler = [[lp + (shift if t % 2 else 0.0) for t, lp in enumerate(r.logprobs)] for r in rollouts]
    return Microbatch([pair], [r.completion_ids for r in rollouts], [0, 0, 0], sampler, [r.truncated for r in rollouts])


def test_recompute_and_tis_through_the_method_by_hand(tiny_model, tmp_path):
    """OPCTMethod.loss with recompute and tis_cap 1.2 at the run-start model: sum_t w_t (log pi_t - log pi_teacher,t),
    the trainer's log-probs and the teacher's from plain forwards; the mismatch statistic is the largest shift."""
    from opct.methods.base import score_pair
    from opct.methods.opct import OPCTMethod

    ctx = _context(tiny_model, tmp_path, **{"opct.rollout_logprobs": "recompute", "opct.tis_cap": 1.2})
    method = OPCTMethod(ctx)
    mb = _microbatch(ctx, method, shift=-0.5)  # the sampler found every other token e^0.5 = 1.65x less likely: capped
    value, stats = method.loss(mb)
    s = score_pair(ctx, mb, reference_side="teacher_prompt")
    trainer, teacher, sampler, mask = s.student_lp.detach(), s.reference_lp, s.sampler_lp, s.mask
    weights = torch.exp(trainer - sampler).clamp(max=1.2) * mask
    assert float(weights.max()) == pytest.approx(1.2) and float(weights[mask.bool()].min()) < 1.01  # both cases occur
    expected = float((weights * (trainer - teacher)).sum())
    assert float(value.detach()) == pytest.approx(expected, rel=1e-5, abs=1e-6)
    untruncated = float((torch.exp(trainer - sampler) * mask * (trainer - teacher)).sum())
    assert abs(expected - untruncated) > 1e-3  # the cap changes the loss: the check above can tell
    assert stats["mismatch_max"] == pytest.approx(0.5, abs=1e-4)  # the shift, plus float32 rounding


def test_mismatch_statistic_is_the_largest_difference(tiny_model, tmp_path):
    from opct.methods.opct import OPCTMethod

    ctx = _context(tiny_model, tmp_path)
    method = OPCTMethod(ctx)
    _, exact = method.loss(_microbatch(ctx, method, shift=0.0))
    _, shifted = method.loss(_microbatch(ctx, method, shift=0.25))
    assert exact["mismatch_max"] < 1e-4  # the sampler is the trainer's own forward on CPU, in float32
    assert shifted["mismatch_max"] == pytest.approx(0.25, abs=1e-4)


@pytest.mark.parametrize("loss", [{"kind": "sampled"}, {"kind": "topk", "topk": 5}, {"kind": "full"},
                                  {"kind": "full", "divergence": "jsd"}])
def test_chunked_scoring_gives_the_whole_logits_loss_and_gradients(tiny_model, tmp_path, loss):
    """OPCTMethod.loss with logits from hidden states in chunks of 3 positions (whole_logits_max_mib: 3 positions'
    logits) against
    the whole-logits path, full fine-tuning in float64: the same loss, statistics and gradient of every weight
    (in float32 they differ by rounding alone, about 5e-6 of the largest gradient: the chunks' matmuls are
    smaller, so their blocking differs)."""
    from opct.methods.logit_path import chunked_heads
    from opct.methods.opct import OPCTMethod
    from opct.models import load_tokenizer

    vocab = len(load_tokenizer(str(tiny_model)))
    results = []
    for limit in ((3 * vocab * 4 + 1) / 2**20, 1e6):  # chunks of 3 positions (the most that fit), or the whole logits
        ctx = _context(tiny_model, tmp_path, torch.float64, **{"opct.loss": loss, "train.whole_logits_max_mib": limit})
        method = OPCTMethod(ctx)
        mb = _microbatch(ctx, method, shift=0.0)
        positions = len(mb.completions) * max(len(c) for c in mb.completions)
        picked = chunked_heads(ctx.cfg.train, ctx.policy, ctx.teacher, positions, ctx.pad_id)
        assert (picked is None) == (limit > 1)  # the path each limit picks
        value, stats = method.loss(mb)
        value.backward()
        results.append((value.detach(), stats, {n: p.grad for n, p in ctx.model.named_parameters()}))
    (chunked, chunked_stats, chunked_grads), (whole, whole_stats, whole_grads) = results
    assert float(whole.abs()) > 1e-3
    torch.testing.assert_close(chunked, whole, rtol=1e-10, atol=1e-12)
    for key in ("kl_sum", "ratio_dev_sum"):
        assert chunked_stats[key] == pytest.approx(whole_stats[key], rel=1e-10, abs=1e-10)
    # the whole path sums the entropy in float32 whatever the logits' dtype; the chunks keep float64
    assert chunked_stats["entropy_sum"] == pytest.approx(whole_stats["entropy_sum"], rel=1e-6)
    for name, grad in whole_grads.items():
        torch.testing.assert_close(chunked_grads[name], grad, rtol=1e-9, atol=1e-10 * float(grad.abs().max()))
