"""KL(fine-tuned ‖ base) on the fine-tuned model's own samples (opct/diagnostics/kl_to_base.py)."""

from __future__ import annotations

import copy

import pytest
import torch

from opct.config import ModelConfig
from opct.models import inference_spec, load_spec_for_inference
from opct.pairs import load_pair_source
from opct_lab.diagnostics.kl_to_base import kl_terms, measure_kl_to_base, summarize_kl


def test_an_answers_term_is_the_sum_of_its_log_ratio_and_cut_answers_count_only_per_token():
    assert kl_terms([-1.0, -0.5], [-2.0, -0.25]) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        kl_terms([-1.0], [])
    rows = [("a", [-1.0, -0.5], [-2.0, -0.25], False), ("b", [-0.1], [-0.2], False), ("b", [-1.0], [-3.0], True)]
    out = summarize_kl(rows, {"samples_per_pair": 1})
    assert out["answers"] == 3 and out["truncated"] == 1 and out["samples_per_pair"] == 1
    assert out["kl_per_sequence"]["value"] == pytest.approx((0.75 + 0.1) / 2) and out["kl_per_sequence"]["n"] == 2
    assert out["kl_per_token"]["value"] == pytest.approx((1.0 - 0.25 + 0.1 + 2.0) / 4)


@pytest.fixture(scope="module")
def organism():
    spec = inference_spec(ModelConfig(name_or_path="organism", dtype="float32", device="cpu"))
    lm, tokenizer, _ = load_spec_for_inference(spec)
    pairs = load_pair_source("organism:sycophancy:train")
    return spec, lm, tokenizer, pairs


def test_a_model_is_at_zero_kl_from_itself_and_a_changed_one_is_not(organism):
    spec, lm, tokenizer, pairs = organism
    same = measure_kl_to_base(lm, lm, tokenizer, pairs, spec=spec, pairs_per_axis=3, samples=2, max_new_tokens=16)
    assert same["answers"] == 6 and abs(same["kl_per_token"]["value"]) < 1e-4
    changed = copy.deepcopy(lm)
    with torch.no_grad():
        changed.lm_head.weight.mul_(0.5)  # a flatter base: the model's own samples are likelier under itself
    apart = measure_kl_to_base(lm, changed, tokenizer, pairs, spec=spec, pairs_per_axis=3, samples=2, max_new_tokens=16)
    assert apart["kl_per_token"]["value"] > 0.01
