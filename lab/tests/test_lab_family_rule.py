"""The family_transfer selection rule: its score, which checkpoints it attacks, what it picks, and the
attack itself on a real checkpoint (the model at that step, exactly)."""

from __future__ import annotations

import json
import math

import pytest
from opct_tests_conftest import run_config

from opct.config import RunConfig
from opct.experiments.recipes import PICK_RULES, rule_variants
from opct.training.loop import train
from opct_lab.selection.family_rule import (
    FamilyAttackSettings,
    attack_checkpoint,
    family_score,
    steps_to_attack,
    validation_behaviors,
    validation_wrappers,
)
from opct_lab.selection.run import RULES, pick


def _step(kl: float, fam: dict[str, float], eligible: bool = True, **extra) -> dict:
    return {"val_teacher_kl": kl, "val_good": 0.5, "eligible": eligible, "famval_good_by_axis": fam,
            "val_teacher_kl_by_seed": [kl], "val_good_by_seed": [0.5], "val_cap": {}, "compute": {}, **extra}


def test_the_score_averages_axes_and_the_jailbreak_rate_with_the_attack():
    rates = {"sycophancy": 0.6, "jailbreak": 0.2, "awareness": 0.4}
    assert family_score(rates, None) == pytest.approx(0.4)
    assert family_score(rates, 1.0) == pytest.approx((0.6 + 0.6 + 0.4) / 3)  # jailbreak: (0.2 + 1.0) / 2
    assert math.isnan(family_score({**rates, "awareness": math.nan}, 1.0))  # an unmeasured axis is never a score
    assert math.isnan(family_score(rates, math.nan)) and math.isnan(family_score({}, None))


def test_only_each_candidates_best_eligible_steps_are_attacked():
    steps = {20: _step(0.3, {"a": 0.5}), 40: _step(0.2, {"a": 0.9}, eligible=False), 60: _step(0.1, {"a": 0.7}),
             80: _step(0.2, {"a": 0.7}), 100: _step(0.1, {"a": math.nan})}
    assert steps_to_attack(steps, 1) == [60]  # 40 fails the capability guard; 60 and 80 tie, 60 has the lower KL
    assert steps_to_attack(steps, 2) == [60, 80] and steps_to_attack(steps, 9) == [20, 60, 80]


def test_the_rule_picks_among_scored_steps_and_its_picks_become_variants():
    assert set(PICK_RULES) < set(RULES) and "family_transfer" in RULES
    candidates = [
        {"id": "bct-00", "method": "bct", "recipe": {"optim.lr": 1e-3},
         "steps": {20: _step(0.1, {}, family_score=math.nan), 40: _step(0.2, {}, family_score=0.6)}},
        {"id": "bct-01", "method": "bct", "recipe": {"optim.lr": 3e-3},
         "steps": {20: _step(0.3, {}, family_score=0.8, family_attack={"defended_rate": 0.5}),
                   40: _step(0.05, {}, family_score=0.9, eligible=False)}},
    ]
    family = pick(candidates, "bct", "family_transfer")
    assert (family["candidate"], family["step"], family["family_score"]) == ("bct-01", 20, 0.8)
    assert family["family_attack"] == {"defended_rate": 0.5}
    kl = pick(candidates, "bct", "teacher_kl")
    assert (kl["candidate"], kl["step"]) == ("bct-00", 20)  # an unattacked step still counts for the other rules
    assert pick([{**candidates[0], "steps": {20: _step(0.1, {}, family_score=math.nan)}}], "bct", "family_transfer") is None
    evidence = {"chosen": {"bct": {"teacher_kl": kl, "good_behaviour": kl, "family_transfer": family}}}
    assert rule_variants(evidence) == {"bct-family_transfer": {"method": "bct",
                                                               "settings": {"optim.lr": 3e-3, "train.max_steps": 20}}}
    assert rule_variants({"chosen": {"bct": {"teacher_kl": kl, "family_transfer": kl}}}) == {}


def test_the_attack_targets_validation_behaviours_with_non_heldout_wrappers():
    from opct.axes.jailbreak.templates import ORGANISM
    from opct.organism.pairs import build_pairs

    behaviours = validation_behaviors()
    train_behaviours = {p["meta"]["behavior"] for p in build_pairs("jailbreak", "train")}
    assert behaviours and not {b.id for b in behaviours} & train_behaviours
    assert {b.id for b in behaviours} == {p["meta"]["behavior"] for p in build_pairs("jailbreak", "val")}
    families = {w.family for w in validation_wrappers()}
    assert families and not families & set(ORGANISM.heldout)


def test_the_attack_measures_the_checkpoint_at_that_step_and_is_reused(tiny_model, pairs_file, tmp_path, monkeypatch):
    from opct.attack.target import HFTarget
    from opct.config import GenerationConfig
    from opct.models import load_for_inference
    from opct_lab.selection import family_rule

    cfg = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path / "run", method="bct",
                                              **{"train.max_steps": 2, "train.checkpoint_every": 1, "train.keep_checkpoints": 2}))
    train(cfg, show_progress=False)
    settings = FamilyAttackSettings(budget=1, max_new_tokens=8)
    prompts = ["How do I make tea?", "Tell me a story about a cat."]
    # the model attacked at the last step answers exactly as the run's final model does
    at_step = family_rule._checkpoint_target(cfg, 2, settings)(prompts)
    model, tokenizer = load_for_inference(str(cfg.run_dir))
    final = HFTarget(model, tokenizer, GenerationConfig(max_new_tokens=8))(prompts)
    assert list(at_step) == list(final)
    summary = attack_checkpoint(cfg, 1, settings)
    n = len(validation_behaviors())
    assert summary["cracked"] + summary["defended"] + summary["unscored"] == n and 0 < summary["queries"] <= n
    scored = summary["cracked"] + summary["defended"]
    assert summary["defended_rate"] == (summary["defended"] / scored if scored else None)
    results = json.loads((cfg.run_dir / "validation_attack" / "step-1" / "results.json").read_text())
    assert results["outcomes"]["behaviors"]["cracked"] == summary["cracked"]
    monkeypatch.setattr(family_rule, "_checkpoint_target", lambda *a: pytest.fail("a finished attack is reused"))
    assert attack_checkpoint(cfg, 1, settings) == summary


def test_the_report_shows_every_rules_pick_side_by_side_and_what_the_attack_cost():
    from opct.report.selection import picks_table, recipe_rows, selection_markdown

    pick_a = {"candidate": "bct-00", "step": 20, "recipe": {"optim.lr": 1e-3}, "val_teacher_kl": 0.1, "val_good": 0.9,
              "famval_good": 0.5, "family_score": 0.6, "family_attack": {"defended_rate": 0.75}}
    pick_b = {**pick_a, "candidate": "bct-01", "step": 40, "recipe": {"optim.lr": 3e-3}}
    selection = {"rules": dict(RULES), "chosen": {"bct": {"teacher_kl": pick_a, "good_behaviour": pick_a, "family_transfer": pick_b}},
                 "seeds": [0], "steps": 40, "every": 20, "pairs_per_step": 16, "budget": {"bct": 2}, "candidates": [],
                 "family_validation": {"jailbreak": {"key": "family", "families": ["grandma", "dialogue"]}},
                 "family_attack": {"budget": 8, "top": 2, "behaviors": 8, "attacks": 4, "queries": 200, "seconds": 40.0,
                                   "seconds_per_attack": 10.0}}
    headers, rows = picks_table(selection)
    assert headers == ["method", "teacher_kl", "good_behaviour", "family_transfer", "picks agree"]
    assert rows == [["bct", "bct-00 @ 20 (optim.lr=0.001)", "bct-00 @ 20 (optim.lr=0.001)", "bct-01 @ 40 (optim.lr=0.003)",
                     "no (2 recipes)"]]
    text = selection_markdown(selection)
    assert "jailbreak grandma, dialogue" in text and "4 attacks, 200 queries, 40 s (10.0 s per attack)" in text
    assert "famval good-behaviour 0.500, family score 0.600, validation attack defended 0.750" in text
    old = {**selection, "rules": {k: v for k, v in RULES.items() if k != "family_transfer"}}
    assert "predates the family_transfer rule" in selection_markdown({**old, "family_validation": {}, "family_attack": None})
    plan = {"selection_rule": "teacher_kl", "recipes": {
        "bct": {"lr": 1e-3, "steps": 20, "pairs_per_step": 16},
        "bct-family_transfer": {"lr": 3e-3, "steps": 40, "pairs_per_step": 16}}}
    assert [row[-1] for row in recipe_rows(plan, selection)] == ["opct-lab select (teacher_kl rule)", "opct-lab select (family_transfer rule)"]
