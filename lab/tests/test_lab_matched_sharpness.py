"""The matched-sharpness study's files (docs/matched_sharpness.md) train exactly what its pre-registration states:
the arms' targets and teachers, one recipe per method and family at both levels, four seeds, 96 tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opct_tests_conftest import REPO

from opct_lab.study.config import family_experiment, load_study
from opct_lab.study.runner import resolve_study

EXPERIMENTS = REPO / "lab" / "opct_lab" / "studies"
MAIN = EXPERIMENTS / "organism_matched_sharpness.yaml"
T05 = EXPERIMENTS / "organism_matched_sharpness_t05.yaml"
#: Each arm's method, BCT targets (n, temperature, every axis) or OPCT teacher temperature, as the page's "Arms".
ARMS = {
    "bct-t10": ("bct", 1.0),
    "bct-t05": ("bct", 0.5),
    "opct": ("opct", 1.0),
    "opct-t05": ("opct", 0.5),
}


@pytest.fixture(scope="module")
def plans():
    return {path.name: resolve_study(load_study(path)) for path in (MAIN, T05)}


def _l1_teacher_kl(family: str) -> dict:
    arch = family.split(".")[1]
    evidence = json.loads((EXPERIMENTS / f"organism_mechanism_selection_w1-short.{arch}.json").read_text())
    return evidence["chosen"]


def test_every_run_trains_its_familys_l1_teacher_kl_pick_at_both_levels(plans):
    seen: dict[tuple[str, str], set] = {}
    for plan in plans.values():
        for family, family_plan in plan.families.items():
            chosen = _l1_teacher_kl(family)
            for stage in family_plan.runs:
                run = stage.config
                pick = chosen[run.method]["teacher_kl"]
                assert run.optim.lr == pick["recipe"]["optim.lr"], (family, stage.key)
                assert run.train.max_steps == pick["step"], (family, stage.key)
                if run.method == "opct":
                    assert run.method_config.loss.kind == pick["recipe"]["opct.loss"]["kind"]
                arch = family.split(".")[1]
                seen.setdefault((arch, run.method), set()).add((run.optim.lr, run.train.max_steps))
    # one recipe per method and family, whatever the level or the arm; the ones the page names
    assert {k: v for k, v in seen.items()} == {
        ("llama", "bct"): {(2e-4, 180)}, ("llama", "opct"): {(3e-4, 180)},
        ("qwen3", "bct"): {(3e-4, 140)}, ("qwen3", "opct"): {(1e-3, 80)},
    }


def test_each_arm_trains_on_its_stated_targets_or_teacher_with_four_seeds(plans):
    arms: dict[str, set] = {}
    for plan in plans.values():
        for family_plan in plan.families.values():
            for stage in family_plan.runs:
                name = stage.variant or stage.config.method
                settings = stage.config.method_config
                if stage.config.method == "opct":
                    assert (settings.sampling.n, settings.sampling.temperature) == (3, 1.0)  # the student's own, T=1
                    arms.setdefault(name, set()).add(("opct", settings.teacher_temperature))
                else:
                    t = settings.targets
                    if name == "bct":  # the reference: the demo's greedy targets (awareness sampled, as the official code)
                        assert (t.n, t.temperature) == (1, 0.0) and set(t.per_axis) == {"awareness"}
                        continue
                    assert t.per_axis == {} and t.n == 3
                    arms.setdefault(name, set()).add(("bct", t.temperature))
                assert stage.config.seed in (0, 1, 2, 3)
    assert {k: v.pop() for k, v in arms.items() if len(v) == 1} == ARMS
    assert [load_study(p).seeds for p in (MAIN, T05)] == [[0, 1, 2, 3]] * 2


def test_the_budget_rule_runs_the_temperature_half_arms_on_qwen3_alone(plans):
    main, t05 = load_study(MAIN), load_study(T05)
    assert set(main.families) == {"w1-short.llama", "w1-short.qwen3", "w4-long.llama", "w4-long.qwen3"}
    assert main.methods == ["base", "bct", "bct-t10", "opct"]
    assert set(t05.families) == {"w1-short.qwen3", "w4-long.qwen3"} and t05.methods == ["bct-t05", "opct-t05"]


def test_the_two_files_share_every_other_setting_at_96_tokens():
    def shared(path: Path) -> dict:
        tree = load_study(path).model_dump(mode="json")
        for key in ("name", "methods", "variants", "families", "family_picks", "levels"):
            tree.pop(key)
        return tree

    assert shared(MAIN) == shared(T05)
    study = load_study(MAIN)
    e = family_experiment(study, "w4-long.qwen3")
    assert {e.train["opct"]["sampling"]["max_new_tokens"], e.train["bct"]["targets"]["max_new_tokens"],
            e.eval.generation.max_new_tokens, e.attack.generation.max_new_tokens} == {96}
    assert e.train["validation"]["every"] is None


def test_the_dry_runs_show_each_arms_settings(plans):
    main, t05 = plans[MAIN.name].describe(), plans[T05.name].describe()
    assert "bct-t10-s3: bct, bct.targets={'n': 3, 'temperature': 1.0, 'max_new_tokens': 96, 'per_axis': {}}, 180 steps" in main
    assert "opct-s0: opct, sampled loss, 180 steps, 16 pairs/step, lr 0.0003" in main
    assert "opct-t05-s3: opct, topk loss, opct.teacher_temperature=0.5, opct.sampling={'n': 3, 'temperature': 1.0" in t05
    assert "bct-t05-s0: bct, bct.targets={'n': 3, 'temperature': 0.5, 'max_new_tokens': 96, 'per_axis': {}}, 140 steps" in t05
