"""OPCT − BCT on another selection rule's picks (``--compare-rules``): which runs stand for each method."""

from __future__ import annotations

from pathlib import Path

from opct.experiments.recipes import rule_variants
from opct.report.experiment import Experiment
from opct.report.load import load_experiment
from opct.report.pooled import difference_parts, pooled_rows
from opct_lab.report.study import rule_runs

_LR = {"x-01": 2e-4, "x-02": 1e-3, "x-03": 3e-3}


def _pick(candidate: str, step: int) -> dict:
    return {"candidate": candidate, "step": step, "recipe": {"optim.lr": _LR[candidate]}}


def _family(root: Path, variants: list[str], chosen: dict) -> Experiment:
    """An experiment planned as ``compare_rules`` plans one (:func:`rule_variants`), of whose variants only
    ``variants`` were trained."""
    keys = ["base"] + [f"{m}-s{s}" for m in ["bct", "opct", *variants] for s in (0, 1)]
    rules = {"teacher_kl": "", "good_behaviour": "", "family_transfer": ""}
    planned = {name: v for name, v in rule_variants({"chosen": chosen}).items() if name in variants}
    assert sorted(planned) == sorted(variants), "a variant the plan would not make"
    return Experiment(root=root, plan={"methods": keys, "seeds": [0, 1], "selection_rule": "teacher_kl",
                                       "variants": planned},
                      selection={"rules": rules, "chosen": chosen})


def test_a_rules_variant_or_the_methods_own_run_where_the_rule_picked_the_same(tmp_path):
    same = {"teacher_kl": _pick("x-01", 160), "good_behaviour": _pick("x-01", 160), "family_transfer": _pick("x-02", 80)}
    llama = _family(tmp_path / "llama", ["bct-family_transfer", "opct-family_transfer"],
                    {"bct": same, "opct": same})
    qwen3 = _family(tmp_path / "qwen3", ["opct-good_behaviour", "opct-family_transfer"],
                    {"bct": same, "opct": {**same, "good_behaviour": _pick("x-03", 60)}})
    runs = rule_runs({"llama": llama, "qwen3": qwen3})
    assert runs == {
        "family_transfer": {"llama": ("opct-family_transfer", "bct-family_transfer"),
                            # qwen3's BCT family_transfer pick differs from its teacher_kl pick and was not trained
                            "qwen3": ("opct-family_transfer", None)},
        "good_behaviour": {"llama": ("opct", "bct"), "qwen3": ("opct-good_behaviour", "bct")},
    }
    assert rule_runs({"llama": _family(tmp_path / "plain", [], {"bct": same, "opct": same})}) == {}
    # two rules with one pick, other than the own rule's: one variant is trained, and it stands for both
    shared = {**same, "good_behaviour": _pick("x-02", 80)}
    gpt2 = _family(tmp_path / "gpt2", ["opct-good_behaviour"], {"bct": same, "opct": shared})
    assert rule_runs({"gpt2": gpt2}) == {"good_behaviour": {"gpt2": ("opct-good_behaviour", "bct")},
                                         "family_transfer": {"gpt2": ("opct-good_behaviour", None)}}


def test_the_runs_given_per_family_are_the_ones_pooled(tmp_path):
    from opct.testing.synthetic_experiment import make_experiment

    exp = load_experiment(make_experiment(tmp_path / "exp", samples=True))
    plain = {r.column.key: difference_parts(r) for r in pooled_rows({"f": exp}, "bct", "opct")}
    swapped = {r.column.key: difference_parts(r) for r in pooled_rows({"f": exp}, "opct", "bct",
                                                                       runs={"f": ("bct", "opct")})}
    assert swapped == plain and any(value != "—" for value, _ in plain.values())
    missing = pooled_rows({"f": exp}, "opct", "bct", runs={"f": (None, "bct")})
    assert all(difference_parts(r) == ("—", "") for r in missing)
