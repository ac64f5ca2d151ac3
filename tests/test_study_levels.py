"""A study with levels (issue 41): the report's OPCT − BCT per level against the measured dose, on fabricated folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixtures import metric, write

from opct.config import ConfigError
from opct.experiments.study import load_study
from opct.report.dose_response import SUPPORTED
from opct.report.levels import FIGURE, profile_path
from opct.report.pooled import HOLDS, NOT_RESOLVED
from opct.runs.experiment_layout import REPORT_MD, STUDY_FILE

REPO = Path(__file__).resolve().parents[1]
MECHANISM = REPO / "opct" / "experiments" / "organism_mechanism.yaml"
#: level -> (its families, the own − target log-prob its profiles give on every axis: the level's dose)
LEVELS = {"w1-short": (("w1-short.llama", "w1-short.qwen3"), 1.0), "w4-short": (("w4-short.llama",), 3.0),
          "w4-long": (("w4-long.llama", "w4-long.qwen3"), 5.0)}
SEEDS = (0, 1)


def fabricate_family(root: Path, index: int) -> None:
    """One family's experiment: 40 attacked behaviours where BCT defends 20 and OPCT 20 + 8·index (so OPCT − BCT is
    exactly 0.2·index), 30 sycophancy questions where both pick the suggestion on the same 10 (OPCT's runs with 2
    unparsed records more), and 40 equal capability items."""
    keys = ["base", *(f"{m}-s{s}" for m in ("bct", "opct") for s in SEEDS)]
    write(root / "plan.json", {"name": root.name, "model": "organism", "methods": keys, "seeds": list(SEEDS)})
    for key in keys:
        opct = key.startswith("opct")
        defended = 20 + (8 * index if opct else 0)
        behaviors = [{"behavior_id": f"b{i}", "cracked": i >= defended} for i in range(40)]
        write(root / "attack" / key / "results.json", {"n": 40, "behaviors": behaviors, "metrics": {
            "dsr": metric(defended / 40, 40)}, "outcomes": {"behaviors": {"unscored": 0}}})
        unparsed = [{"item_id": "q0", "variant": "b9", "parsed": None, "outcome": "unparsed", "scores": {"suggested": 1.0}}
                    ] * 2 if opct else []
        recs = [{"item_id": f"q{q}", "variant": "b0", "parsed": "B", "outcome": "scored",
                 "scores": {"suggested": float(q < 10)}} for q in range(30)]
        write(root / "eval" / key / "sycophancy" / "samples.jsonl", recs + unparsed)
        write(root / "eval" / key / "sycophancy" / "results.json", {"metrics": {"sycophancy_rate": metric(
            1 / 3, 30, unscored={"unparsed": 2} if opct else {})}})
        recs = [{"item_id": f"i{i}", "outcome": "scored", "scores": {"correct": i % 5 != 0}} for i in range(40)]
        write(root / "eval" / key / "capability_mc" / "samples.jsonl", recs)
        write(root / "eval" / key / "capability_mc" / "results.json", {"metrics": {"accuracy": metric(0.8, 40)}})
        if key != "base":  # 4 steps of 10·(index + 1) tokens; OPCT samples and teacher-scores them, BCT neither here
            kinds = "trained" if opct else "none"
            write(root / "train" / key / "manifest.json", {"method": key.split("-s")[0], "compute": {
                "generated": kinds, "teacher_scored": kinds}})
            write(root / "train" / key / "metrics.jsonl", [{"step": s, "completion_tokens": 10 * (index + 1),
                                                           "step_time_s": 0.5} for s in range(1, 5)])


def profile(gap: float) -> dict:
    """A profile whose own − target sequence log-prob is ``gap`` on each of the three axes."""
    est = {"ci_low": -0.1, "ci_high": 0.1}
    return {"axes": {axis: {"measures": {"own_seq_logprob": {**est, "value": 0.0},
                                         "target_seq_logprob": {**est, "value": -gap},
                                         "divergence_position": {"value": gap}}}
                     for axis in ("sycophancy", "jailbreak", "awareness")}}


def fabricate_level_study(root: Path) -> Path:
    families = [f for names, _ in LEVELS.values() for f in names]
    write(root / STUDY_FILE, {"name": "mechanism", "families": {f: f"organism-{f}" for f in families},
                              "seeds": list(SEEDS), "experiments": {f: f for f in families},
                              "levels": {lv: list(names) for lv, (names, _) in LEVELS.items()}})
    for index, (names, gap) in enumerate(LEVELS.values()):
        for family in names:
            fabricate_family(root / family, index)
            write(profile_path(root, family), profile(gap))
    return root


def test_the_report_reads_opct_minus_bct_per_level_against_the_dose(tmp_path):
    from opct.report.study import write_study_report

    root = fabricate_level_study(tmp_path / "study")
    data = write_study_report(root)["dose_response"]
    levels = {lv["level"]: lv for lv in data["levels"]}
    assert [lv["seed"] for lv in data["levels"]] == [47, 48, 49]
    assert {name: lv["dose"]["value"] for name, lv in levels.items()} == pytest.approx({"w1-short": 1.0, "w4-short": 3.0,
                                                                                        "w4-long": 5.0})
    assert [levels[lv]["metrics"]["dsr_adaptive"]["value"] for lv in LEVELS] == pytest.approx([0.0, 0.2, 0.4])
    w4 = levels["w4-long"]["metrics"]["dsr_adaptive"]
    assert (w4["rows"], w4["units"], w4["cells"], w4["cells_planned"]) == (160, 40, 4, 4)
    assert levels["w4-long"]["metrics"]["sycophancy"]["unscored"] == {"opct": {"unparsed": 8}, "bct": {}}
    assert levels["w4-short"]["profile"]["w4-short.llama"]["jailbreak"]["divergence_position"] == 3.0
    assert levels["w4-long"]["compute"] == {
        "opct": {"tokens_generated": 120, "tokens_teacher_scored": 120, "tokens_backpropagated": 120, "train_seconds": 2.0},
        "bct": {"tokens_generated": 0, "tokens_teacher_scored": 0, "tokens_backpropagated": 120, "train_seconds": 2.0}}
    trends = {t["key"]: t for t in data["trends"]}
    # D grows by 0.2 per 2 nats of dose at every level: the weighted slope is 0.1 per nat, whatever the weights
    assert trends["dsr_adaptive"]["beta"] == pytest.approx(0.1)
    assert trends["dsr_adaptive"]["reading"] == trends["dsr_adaptive"]["reading_bonferroni"] == HOLDS
    assert trends["sycophancy"]["beta"] == pytest.approx(0.0) and trends["sycophancy"]["reading"] == NOT_RESOLVED
    # w1-short: OPCT and BCT defend the same behaviours, so that level's resamples have no spread
    assert trends["sycophancy"]["collapsed_levels"] == 3 and trends["dsr_adaptive"]["collapsed_levels"] == 1
    assert data["hypothesis"]["outcome"] == SUPPORTED
    md = (root / REPORT_MD).read_text()
    assert "OPCT − BCT per level, against the measured dose" in md and f"**Hypothesis: {SUPPORTED}.**" in md
    assert "| w4-long | w4-long.llama, w4-long.qwen3 | 5.000 [" in md and "OPCT 8 unparsed; BCT 0" in md
    assert "| w4-long | OPCT | 120 | 120 | 120 | 2 |" in md
    assert (root / FIGURE).stat().st_size > 1000


def test_a_level_without_a_profile_is_shown_unmeasured_and_the_hypothesis_is_not_read(tmp_path):
    from opct.report.study import write_study_report

    root = fabricate_level_study(tmp_path / "study")
    profile_path(root, "w4-long.llama").unlink()
    profile_path(root, "w4-long.qwen3").unlink()
    data = write_study_report(root)["dose_response"]
    last = data["levels"][-1]
    assert last["dose"] is None and last["no_profile"] == ["w4-long.llama", "w4-long.qwen3"]
    assert data["hypothesis"]["outcome"] == "not read"
    assert "not measured (no profile: w4-long.llama, w4-long.qwen3)" in (root / REPORT_MD).read_text()


def test_the_mechanism_study_declares_every_family_in_one_level_and_levels_are_checked():
    study = load_study(MECHANISM)
    assert list(study.levels) == ["w1-short", "w4-short", "w4-long", "w16-long"]
    assert all(names == [f"{lv}.llama", f"{lv}.qwen3"] for lv, names in study.levels.items())
    with pytest.raises(ConfigError, match="w9.llama is not one of families"):
        load_study(MECHANISM, ["levels.w1-short=[w1-short.llama, w1-short.qwen3, w9.llama]"])
    with pytest.raises(ConfigError, match="w16-long.qwen3 is in no level"):
        load_study(MECHANISM, ["levels.w16-long=[w16-long.llama]"])
    with pytest.raises(ConfigError, match="w4-long.llama is in more than one level"):
        load_study(MECHANISM, ["levels.w16-long=[w16-long.llama, w16-long.qwen3, w4-long.llama]"])


def test_the_study_measures_a_level_profile_only_where_none_at_the_preregistered_settings_is_there(tmp_path):
    from opct.experiments.level_profiles import PROFILE_SETTINGS, PROFILE_SOURCES, ensure_level_profiles

    good = {**PROFILE_SETTINGS, "pairs": list(PROFILE_SOURCES), **profile(2.0)}
    built = tmp_path / "levels" / "w4-long" / "llama"
    write(built / "profile.json", good)  # what the level build script writes beside the model
    write(profile_path(tmp_path / "study", "w1-short.llama"), good)
    write(profile_path(tmp_path / "study", "w1-short.qwen3"), {**good, "samples_per_pair": 1})  # other settings
    measured = []

    def fake_measure(model: str) -> dict:
        measured.append(model)
        return {**good, "model": model}

    levels = {"w1-short": ["w1-short.llama", "w1-short.qwen3"], "w4-long": ["w4-long.llama"]}
    models = {"w1-short.llama": "organism-llama", "w1-short.qwen3": "organism-qwen3", "w4-long.llama": str(built)}
    done = ensure_level_profiles(tmp_path / "study", levels, models, log=lambda _: None, measure=fake_measure)
    assert done == {"w1-short.llama": "kept", "w1-short.qwen3": "measured",
                    "w4-long.llama": f"copied from {built / 'profile.json'}"}
    assert measured == ["organism-qwen3"]
    again = ensure_level_profiles(tmp_path / "study", levels, models, log=lambda _: None, measure=fake_measure)
    assert set(again.values()) == {"kept"} and measured == ["organism-qwen3"]


def test_the_dry_run_of_the_mechanism_study_names_its_levels():
    from opct.experiments.study import resolve_study

    text = resolve_study(load_study(MECHANISM)).describe()
    assert "levels (OPCT − BCT per level against its dose" in text and "w16-long: w16-long.llama, w16-long.qwen3" in text
