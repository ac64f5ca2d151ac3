"""The public opct names the lab builds on (issue 72: the lab imports no private opct name, so a rename in opct
fails a test here, not the lab): each is tested for what it does, not only that it exists."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from test_ablation import fabricate_ablation

from opct.config import ConfigError, set_dotted
from opct.diagnostics.measure import eval_mode, generate_rollouts, pair_cluster
from opct.experiments.runner import experiment_eval_tasks, held_back_by_axis, load_experiment
from opct.organism.pairs import held_back_families
from opct.pairs import ConsistencyPair
from opct.report import load_experiment as load_report
from opct.report.ablation import variant_compute
from opct.sampling.engine import SamplingParams
from opct.stats.estimate import percentile_ci

DEMO = Path(__file__).resolve().parents[1] / "opct" / "experiments" / "organism_demo.yaml"


def test_percentile_ci_is_the_two_tailed_quantiles_of_the_draws_without_nans():
    draws = np.arange(101, dtype=float)  # 0..100: the q-quantile is 100·q
    assert percentile_ci(draws, 0.1) == pytest.approx((5.0, 95.0))
    assert percentile_ci(np.append(draws, [np.nan, np.nan]), 0.1) == pytest.approx((5.0, 95.0))
    lo, hi = percentile_ci(np.array([np.nan, np.nan]), 0.05)
    assert math.isnan(lo) and math.isnan(hi)
    assert all(isinstance(x, float) for x in percentile_ci(draws, 0.05))


def test_set_dotted_sets_a_nested_key_making_missing_sections_and_refuses_a_value_on_the_way():
    tree = {"optim": {"lr": 1e-3, "betas": [0.9, 0.95]}, "seed": 0}
    set_dotted(tree, "optim.lr", 1e-5)
    set_dotted(tree, "opct.sampling.n", 6)
    set_dotted(tree, "seed", 3)
    assert tree == {"optim": {"lr": 1e-5, "betas": [0.9, 0.95]}, "opct": {"sampling": {"n": 6}}, "seed": 3}
    with pytest.raises(ConfigError, match="'seed' is not a section"):
        set_dotted(tree, "seed.value", 1)
    assert tree["seed"] == 3


def test_pair_cluster_is_shared_exactly_by_the_pairs_that_share_a_teacher_prompt():
    def pair(pid: str, teacher: str, prompt: str) -> ConsistencyPair:
        return ConsistencyPair(pid, [{"role": "user", "content": prompt}], [{"role": "user", "content": teacher}])

    a, b, c = pair("a", "2+2?", "2+2? I think 5."), pair("b", "2+2?", "2+2? Surely 3."), pair("c", "3+3?", "3+3? 7.")
    assert pair_cluster(a) == pair_cluster(b) != pair_cluster(c)
    assert hash(pair_cluster(a)) == hash(pair_cluster(b))


def test_eval_mode_puts_models_in_eval_and_gives_back_each_ones_flag_even_on_an_error():
    training, frozen = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).eval()
    with eval_mode(training, frozen):
        assert not training.training and not frozen.training
    assert training.training and not frozen.training
    with pytest.raises(RuntimeError), eval_mode(training, frozen):
        raise RuntimeError("a failed pass")
    assert training.training and not frozen.training


def test_generate_rollouts_samples_n_per_prompt_keyed_by_the_prompts_key_not_its_place(tiny_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tokenizer = AutoModelForCausalLM.from_pretrained(tiny_model), AutoTokenizer.from_pretrained(tiny_model)
    model.train()
    prompts = [tokenizer("the first prompt")["input_ids"], tokenizer("another one, longer")["input_ids"]]
    params = SamplingParams(n=2, max_new_tokens=5, seed=7)
    both = generate_rollouts(model, tokenizer, prompts, ["x", "y"], params)
    assert [(r.prompt_index, r.sample_index) for r in both] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(r.prompt_ids == prompts[r.prompt_index] and 0 < len(r.completion_ids) <= 5 for r in both)
    assert all(len(r.logprobs) == len(r.completion_ids) for r in both)
    alone = generate_rollouts(model, tokenizer, prompts[1:], ["y"], params)
    assert [r.completion_ids for r in alone] == [r.completion_ids for r in both[2:]]
    assert model.training  # the sampler gives the model back in the mode it found it


def test_variant_compute_is_the_mean_over_the_seeds_that_can_be_read(tmp_path):
    root = fabricate_ablation(tmp_path / "abl")
    exp = load_report(root)
    compute, seeds = variant_compute(exp, "opct-good")  # 10 steps of 6 samples x 10 tokens, 0.5 s each
    assert (compute, seeds) == ({"tokens_generated": 600, "tokens_teacher_scored": 600,
                                 "tokens_backpropagated": 600, "train_seconds": 5.0}, 3)
    (root / "train" / "opct-good-s1" / "manifest.json").unlink()
    (root / "train" / "opct-good-s2" / "metrics.jsonl").write_text(
        '{"step": 1, "completion_tokens": 30, "step_time_s": 1.0, "loss": 1.0}\n')
    exp = load_report(root)
    compute, seeds = variant_compute(exp, "opct-good")
    assert seeds == 2 and compute["tokens_generated"] == (600 + 30) / 2 and compute["train_seconds"] == 3.0
    assert [w for w in exp.warnings if "opct-good-s1" in w and "unreadable" in w]
    assert variant_compute(exp, "no-such-variant") == ({}, 0)


def test_held_back_by_axis_names_each_organism_trained_axis_families_held_out_of_training():
    demo = load_experiment(DEMO)
    held = held_back_by_axis(demo)
    assert held == {a: list(held_back_families(a)) for a in demo.axes} and all(held.values())
    own = load_experiment(DEMO, ["train_data={sycophancy: [pairs.jsonl]}"])
    assert set(held_back_by_axis(own)) == set(demo.axes) - {"sycophancy"}


def test_experiment_eval_tasks_are_the_axes_per_split_and_capability_once_when_asked():
    demo = load_experiment(DEMO)
    assert (demo.eval.splits, demo.eval.capability) == (["heldout", "train"], True)
    names = [t.name for t in experiment_eval_tasks(demo)]
    assert names[:6] == [*demo.axes, *(f"{a}_train" for a in demo.axes)]
    capability = names[6:]
    assert capability and all(n.startswith("capability_") for n in capability)
    one = load_experiment(DEMO, ["eval.capability=false", "eval.splits=[heldout]"])
    assert [t.name for t in experiment_eval_tasks(one)] == demo.axes
