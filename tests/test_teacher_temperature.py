"""``opct.teacher_temperature``: the frozen teacher's logits divided by tau before its log-softmax, in every
OPCT loss kind, checked against a hand computation from plain forward passes; a tempered run resumes exactly."""

from __future__ import annotations

import pytest
import torch
from conftest import run_config
from run_helpers import adapter, assert_same_weights, train_reference

from opct.config import RunConfig
from opct.training.loop import train

PROMPT = [{"role": "user", "content": "What is the capital of Zarnia? I think it is Velmora."}]
CLEAN = [{"role": "user", "content": "What is the capital of Zarnia?"}]


def _context(tiny_model, tmp_path, loss: dict, tau: float):
    from accelerate import Accelerator

    from opct.methods.base import TrainContext
    from opct.models import load_model, load_tokenizer, make_teacher

    tree = run_config(tiny_model, tmp_path / "unused.jsonl", tmp_path, finetune="full",
                      **{"opct.loss": loss, "opct.teacher_temperature": tau})
    cfg = RunConfig.model_validate(tree)
    model = load_model(cfg.model)
    return TrainContext(cfg=cfg, accelerator=Accelerator(cpu=True), model=model, policy=model,
                        tokenizer=load_tokenizer(str(tiny_model)), teacher=make_teacher(model), run_dir=tmp_path)


def _hand_logprobs(model, prompt_ids: list[int], completion: list[int], tau: float) -> torch.Tensor:
    """log softmax(z / tau) at each completion position, from one plain forward of prompt + completion."""
    ids = torch.tensor([prompt_ids + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : len(prompt_ids) - 1 + len(completion)]
    return torch.log_softmax(logits.double() / tau, dim=-1)


def _hand_loss(ctx, completions: list[list[int]], sampler_lps: list[list[float]], kind: str, tau: float, k: int) -> float:
    """The loss each kind should give at the first step (student = run-start model, importance ratio 1)."""
    total = 0.0
    for completion, sampler_lp in zip(completions, sampler_lps, strict=True):
        student = _hand_logprobs(ctx.teacher.model, ctx.render(PROMPT), completion, 1.0)
        teacher = _hand_logprobs(ctx.teacher.model, ctx.render(CLEAN), completion, tau)
        if kind == "sampled":  # sum_t log pi_sampler(y_t) - log pi_teacher,tau(y_t)
            total += sum(lp - float(teacher[t, y]) for t, (y, lp) in enumerate(zip(completion, sampler_lp, strict=True)))
        else:
            p = student.exp()
            per_vocab = p * (student - teacher)
            if kind == "topk":
                top = student.topk(k, dim=-1).indices
                per_vocab = per_vocab.gather(-1, top)
            total += float(per_vocab.sum())
    return total


@pytest.mark.parametrize(("loss", "tau"), [
    ({"kind": "sampled"}, 0.5), ({"kind": "topk", "topk": 5}, 0.5), ({"kind": "full"}, 0.5), ({"kind": "full"}, 2.0),
])
def test_each_loss_kind_uses_the_tempered_teacher_as_computed_by_hand(tiny_model, tmp_path, loss, tau):
    from opct.methods.base import Microbatch
    from opct.methods.opct import OPCTMethod
    from opct.pairs import ConsistencyPair
    from opct.sampling.engine import SamplingParams

    ctx = _context(tiny_model, tmp_path, loss, tau)
    method = OPCTMethod(ctx)
    pair = ConsistencyPair("p", PROMPT, CLEAN)
    rollouts = ctx.sample(method.sampler, [pair], SamplingParams(n=3, temperature=1.0, max_new_tokens=8, seed=4))
    completions, sampler_lps = [r.completion_ids for r in rollouts], [r.logprobs for r in rollouts]
    mb = Microbatch([pair], completions, [0, 0, 0], sampler_lps, [r.truncated for r in rollouts])
    value, stats = method.loss(mb)
    expected = _hand_loss(ctx, completions, sampler_lps, loss["kind"], tau, loss.get("topk", 0))
    untempered = _hand_loss(ctx, completions, sampler_lps, loss["kind"], 1.0, loss.get("topk", 0))
    assert float(value.detach()) == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert abs(expected - untempered) > 1e-3  # the temperature changes the loss: the check above can tell
    if loss["kind"] == "sampled":  # the KL statistic is to the tempered teacher too
        assert stats["kl_sum"] == pytest.approx(expected, rel=1e-4, abs=1e-5)


def test_temperature_one_leaves_the_teacher_bit_identical(tiny_model, tmp_path):
    from opct.methods.base import Microbatch, score_pair
    from opct.pairs import ConsistencyPair
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler

    ctx = _context(tiny_model, tmp_path, {"kind": "full"}, 1.0)
    pair = ConsistencyPair("p", PROMPT, PROMPT)
    rollouts = ctx.sample(HFSampler(ctx.policy, ctx.tokenizer), [pair], SamplingParams(n=2, max_new_tokens=8, seed=1))
    mb = Microbatch([pair], [r.completion_ids for r in rollouts], [0, 0], [r.logprobs for r in rollouts])
    default = score_pair(ctx, mb, reference_side="teacher_prompt", keep_logits=True)
    explicit = score_pair(ctx, mb, reference_side="teacher_prompt", keep_logits=True, reference_temperature=1.0)
    assert torch.equal(default.reference_logits, explicit.reference_logits)
    assert torch.equal(default.reference_lp, explicit.reference_lp)
    assert ((default.student_lp.detach() - default.reference_lp) * default.mask).abs().max().item() == 0.0


def test_the_temperature_must_be_positive(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="teacher_temperature"):
        RunConfig.model_validate(run_config(tiny_model, tmp_path / "p.jsonl", tmp_path, **{"opct.teacher_temperature": 0}))


def test_a_tempered_run_resumes_exactly(tiny_model, tmp_path):
    """Killed after step 2 and rerun, a run at teacher_temperature 0.5 ends with the uninterrupted run's weights."""
    trained = train_reference(tiny_model, tmp_path / "ref", **{"opct.teacher_temperature": 0.5})
    untempered = train_reference(tiny_model, tmp_path / "plain")
    assert any(not torch.equal(a, b) for a, b in zip(trained.reference.values(), untempered.reference.values(), strict=True))
    cfg = trained.copy(tmp_path / "resumed", after_step=2)
    train(cfg, show_progress=False)
    assert_same_weights(adapter(cfg.run_dir), trained.reference)
