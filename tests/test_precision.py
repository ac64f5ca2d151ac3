"""Mixed precision: the frozen teacher runs under the same autocast as the student."""

from __future__ import annotations

import pytest
import torch
from conftest import run_config


@pytest.fixture
def fresh_accelerate_state():
    """accelerate keeps one process-wide state; a bf16 Accelerator needs it reset (and reset after)."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_step_zero_kl_is_zero_under_bf16(tiny_model, tmp_path, finetune, fresh_accelerate_state):
    """Before any update the student is the teacher: with ``teacher_prompt == prompt`` every token's
    log-prob must match exactly, although the student runs in bf16 autocast."""
    from accelerate import Accelerator

    from opct.config import RunConfig
    from opct.methods.base import Microbatch, TrainContext, score_pair
    from opct.models import add_lora, load_model, load_tokenizer, make_teacher
    from opct.pairs import ConsistencyPair
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler

    tree = run_config(tiny_model, tmp_path / "unused.jsonl", tmp_path, finetune=finetune, **{"train.mixed_precision": "bf16"})
    cfg = RunConfig.model_validate(tree)
    acc = Accelerator(cpu=True, mixed_precision="bf16")
    model = load_model(cfg.model)
    if finetune == "lora":
        model = add_lora(model, cfg.lora)
    teacher = make_teacher(model)
    prepared = acc.prepare(model)
    tok = load_tokenizer(str(tiny_model))
    ctx = TrainContext(cfg=cfg, accelerator=acc, model=prepared, policy=acc.unwrap_model(prepared), tokenizer=tok,
                       teacher=teacher, run_dir=tmp_path)
    msgs = [{"role": "user", "content": "What is 2 + 2? I am sure it is 5."}]
    pair = ConsistencyPair("p", msgs, msgs)
    rollouts = ctx.sample(HFSampler(ctx.policy, tok), [pair], SamplingParams(n=3, temperature=1.0, max_new_tokens=12, seed=1))
    mb = Microbatch([pair], [r.completion_ids for r in rollouts], [0, 0, 0], [r.logprobs for r in rollouts], [r.truncated for r in rollouts])
    scores = score_pair(ctx, mb, reference_side="teacher_prompt")
    assert scores.student_lp.dtype == torch.float32 and scores.mask.sum() > 0
    kl = ((scores.student_lp.detach() - scores.reference_lp) * scores.mask).abs().max().item()
    assert kl == 0.0
