"""A study with levels (issue 41): the report's OPCT − BCT per level against the measured dose, on fabricated folders."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from report_fixtures import metric, write
from rich.console import Console

from opct.config import ConfigError
from opct.report.pooled import HOLDS, NOT_RESOLVED
from opct.runs.experiment_layout import REPORT_MD
from opct_lab.layout import STUDY_FILE
from opct_lab.report.levels import FIGURE, profile_path
from opct_lab.report.trend import SUPPORTED
from opct_lab.study.config import load_study

REPO = Path(__file__).resolve().parents[2]
STUDIES = REPO / "lab" / "opct_lab" / "studies"
MECHANISM = STUDIES / "organism_mechanism.yaml"
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
    from opct_lab.report.study import study_renderables, write_study_report

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
    assert "From w1-short to w4-long the dose rose (1.000 → 5.000 nats): a positive β means" in md
    assert trends["dsr_adaptive"]["incomplete_levels"] == trends["sycophancy"]["incomplete_levels"] == []
    assert (root / FIGURE).stat().st_size > 1000
    console = Console(width=80, record=True, file=io.StringIO())
    for renderable in study_renderables(write_study_report(root), 80):
        console.print(renderable)
    text = console.export_text()
    assert "β +10.0 per nat" in text and f"hypothesis: {SUPPORTED}" in text


def test_a_falling_dose_and_an_incomplete_level_are_said_beside_the_trend(tmp_path):
    from opct_lab.report.levels import dose_direction
    from opct_lab.report.study import write_study_report

    root = fabricate_level_study(tmp_path / "study")
    for family, gap in (("w1-short.llama", 5.0), ("w1-short.qwen3", 5.0), ("w4-long.llama", 1.0), ("w4-long.qwen3", 1.0)):
        write(profile_path(root, family), profile(gap))  # the most diverse level now has the lowest dose
    results = root / "w4-long.qwen3" / "eval" / "opct-s1" / "sycophancy" / "results.json"
    write(results, {**json.loads(results.read_text()), "status": "incomplete"})  # too many unscored answers
    data = write_study_report(root)["dose_response"]
    trends = {t["key"]: t for t in data["trends"]}
    assert trends["sycophancy"]["incomplete_levels"] == ["w4-long"] and trends["dsr_adaptive"]["incomplete_levels"] == []
    assert trends["dsr_adaptive"]["beta"] < 0  # OPCT − BCT grows along the levels while the dose falls
    md = (root / REPORT_MD).read_text()
    assert "From w1-short to w4-long the dose fell (5.000 → 1.000 nats): a negative β means OPCT − BCT grows" in md
    assert "INCOMPLETE evals at w4-long: those levels' differences are over what was measured" in md
    assert dose_direction([{"level": "a", "dose": None}, {"level": "b", "dose": {"value": 1.0}}]) == ""


def test_a_level_without_a_profile_is_shown_unmeasured_and_the_hypothesis_is_not_read(tmp_path):
    from opct_lab.report.study import write_study_report

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
    assert list(study.levels) == ["w1-short", "w4-long", "w16-long"]  # L2 left out (docs/mechanism.md, Deviations)
    # L4 on llama alone (docs/mechanism.md, Deviations: qwen3's L4 failed its check)
    assert study.levels == {lv: [f"{lv}.llama", f"{lv}.qwen3"] for lv in ("w1-short", "w4-long")} | {"w16-long": ["w16-long.llama"]}
    with pytest.raises(ConfigError, match="w9.llama is not one of families"):
        load_study(MECHANISM, ["levels.w1-short=[w1-short.llama, w1-short.qwen3, w9.llama]"])
    with pytest.raises(ConfigError, match="w4-long.qwen3 is in no level"):
        load_study(MECHANISM, ["levels.w4-long=[w4-long.llama]"])
    with pytest.raises(ConfigError, match="w4-long.llama is in more than one level"):
        load_study(MECHANISM, ["levels.w16-long=[w16-long.llama, w4-long.llama]"])


def test_the_study_measures_a_level_profile_only_where_none_at_the_preregistered_settings_is_there(tmp_path):
    from opct_lab.study.levels import PROFILE_SETTINGS, PROFILE_SOURCES, ensure_level_profiles

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
    from opct_lab.study.runner import resolve_study

    text = resolve_study(load_study(MECHANISM)).describe()
    assert "levels (OPCT − BCT per level against its dose" in text and "w16-long: w16-long.llama\n" in text
    assert "KL(fine-tuned ‖ base)" in text


def test_the_dry_run_shows_each_familys_own_recipes():
    """The families train different picks (their own selections), so the plan lists every family's runs."""
    from opct_lab.study.runner import resolve_study

    text = resolve_study(load_study(MECHANISM)).describe()
    blocks: dict[str, str] = {}
    family = ""
    for line in text.split("training runs, by family (each on its own recipes):\n", 1)[1].splitlines():
        if line.startswith("    "):
            blocks[family] += line.strip() + "\n"
        elif line.startswith("  ") and line.endswith(":"):
            family = line.strip()[:-1]
            blocks[family] = ""
    assert set(blocks) == set(load_study(MECHANISM).families)
    qwen3 = blocks["w4-long.qwen3"]  # organism_mechanism_selection_w4-long.qwen3.json, family_transfer
    assert "bct-s0: bct, 100 steps, 16 pairs/step, lr 0.001," in qwen3
    assert "opct-s0: opct, topk loss, 40 steps, 16 pairs/step, lr 0.001," in qwen3
    assert "opct-sharp-s2: opct, topk loss, opct.teacher_temperature=0.5, 40 steps" in qwen3
    assert "bct-s0: bct, 20 steps, 16 pairs/step, lr 0.001," in blocks["w1-short.llama"]


def test_each_runs_kl_is_measured_once_and_related_to_its_forgetting_across_runs(tmp_path):
    from opct_lab.report.study import write_study_report
    from opct_lab.study.run_kl import KL_FILE, ensure_run_kls

    root = fabricate_level_study(tmp_path / "study")
    families = {f: f"organism-{f}" for names, _ in LEVELS.values() for f in names}
    for index, (names, _) in enumerate(LEVELS.values()):
        for family in names:
            for seed in SEEDS:  # OPCT forgets 4·index more capability items than BCT, and moves further from the base
                opct = root / family / "eval" / f"opct-s{seed}" / "capability_mc"
                recs = [{"item_id": f"i{i}", "outcome": "scored", "scores": {"correct": i % 5 != 0 and i < 40 - 4 * index}}
                        for i in range(40)]
                write(opct / "samples.jsonl", recs)
                write(opct / "results.json", {"metrics": {"accuracy": metric(sum(r["scores"]["correct"] for r in recs) / 40, 40)}})
                for method in ("bct", "opct"):
                    (root / family / "train" / f"{method}-s{seed}" / "final").mkdir()
            (root / family / "train" / "opct-s1" / "final").rmdir()  # one run not finished yet
    measured = []

    def fake_measure(run_dir: Path, base: str, sources: list[str]) -> dict:
        measured.append(run_dir.name)
        index = next(i for i, (names, _) in enumerate(LEVELS.values()) if run_dir.parent.parent.name in names)
        kl = 0.5 * (index + 1) if run_dir.name.startswith("opct") else 0.1
        # one run whose answers were mostly cut off at the token limit: its KL is over a few answers only
        cut = 6 if (run_dir.parent.parent.name, run_dir.name) == ("w1-short.qwen3", "bct-s0") else 0
        return {"kl_per_sequence": {"value": 100.0 if cut else kl}, "answers": 10, "truncated": cut}

    for family in families:  # the manifest's training sources are what the KL is measured on
        for run in (root / family / "train").iterdir():
            write(run / "manifest.json", {"method": run.name.split("-s")[0], "config": {"data": {"train": ["organism:x:train"]}},
                                          **json.loads((run / "manifest.json").read_text())})
    done = ensure_run_kls(root, families, log=lambda _: None, measure=fake_measure)
    assert list(done.values()).count("measured") == 15 and list(done.values()).count("not finished") == 5
    assert json.loads((root / "w4-long.llama" / "train" / "opct-s0" / KL_FILE).read_text())["pairs"] == ["organism:x:train"]
    assert set(ensure_run_kls(root, families, log=lambda _: None, measure=fake_measure).values()) == {"kept", "not finished"}
    razor = write_study_report(root)["razor"]
    assert len(razor["runs"]) == 15
    cut_off = [p for p in razor["runs"] if p["incomplete"]]
    assert [(p["family"], p["run"], p["answers"], p["truncated"]) for p in cut_off] == [("w1-short.qwen3", "bct-s0", 10, 6)]
    rows = {r["metric"]: r for r in razor["correlations"]}
    cap = rows["regression cap:capability_mc"]  # its KL of 100 is not a measurement, so it cannot drive r
    assert cap["r"] < -0.8 and cap["ci_high"] < 0 and cap["runs"] == 14
    assert cap["left_out"] == ["w1-short.qwen3/bct-s0"]
    text = (root / REPORT_MD).read_text()
    assert "KL(fine-tuned ‖ base) and forgetting" in text
    assert "| w1-short.qwen3 | bct-s0 | 100.000 INCOMPLETE | 10 | 6 |" in text


def test_a_missing_level_organism_is_built_from_its_names_and_a_present_one_is_kept(tmp_path):
    from opct_lab.study.levels import ensure_level_builds, level_build

    assert level_build("w16-long", "w16-long.qwen3") == (16, "long", "qwen3")
    with pytest.raises(ValueError, match="w<N>-<short|long>"):
        level_build("diverse", "diverse.llama")
    with pytest.raises(ValueError, match="<level>.<arch>"):
        level_build("w4-long", "llama")
    built = []

    def fake_build(out: Path, wordings: int, length: str, arch: str) -> None:
        built.append((out, wordings, length, arch))
        out.mkdir(parents=True)

    present = tmp_path / "w4-short" / "llama"
    present.mkdir(parents=True)
    levels = {"w1-short": ["w1-short.llama"], "w4-short": ["w4-short.llama", "w4-short.qwen3"]}
    models = {"w1-short.llama": "organism-llama", "w4-short.llama": str(present),
              "w4-short.qwen3": str(tmp_path / "w4-short" / "qwen3")}
    done = ensure_level_builds(levels, models, log=lambda _: None, build=fake_build)
    assert done == {"w1-short.llama": "present", "w4-short.llama": "present", "w4-short.qwen3": "built"}
    assert built == [(tmp_path / "w4-short" / "qwen3", 4, "short", "qwen3")]
    assert set(ensure_level_builds(levels, models, log=lambda _: None, build=fake_build).values()) == {"present"}


def test_a_present_level_build_of_another_recipe_is_refused_naming_what_differs(tmp_path):
    from opct.organism.recipe import BuildConfig, recipe
    from opct.organism.wordings import ResponseStyle
    from opct_lab.study.levels import ensure_level_builds

    folder = tmp_path / "w4-short" / "llama"
    folder.mkdir(parents=True)
    today = recipe(0, BuildConfig(arch="llama", responses=ResponseStyle(4, "short")))
    models, levels = {"w4-short.llama": str(folder)}, {"w4-short": ["w4-short.llama"]}

    def never(*_):
        raise AssertionError("a present folder is never built again")

    (folder / "recipe.json").write_text(json.dumps({**today, "files": {}}))
    assert ensure_level_builds(levels, models, log=lambda _: None, build=never) == {"w4-short.llama": "present"}
    stale = {**today, "recipe_sha256": "da79d877", "files": {}}  # built from another wording pool
    (folder / "recipe.json").write_text(json.dumps(stale))
    with pytest.raises(ValueError, match=r"this build of level w4-short.*differs in: recipe_sha256.*move the folder aside"):
        ensure_level_builds(levels, models, log=lambda _: None, build=never)
    (folder / "recipe.json").write_text(json.dumps({**today, "files": {"model.safetensors": "0" * 64}}))
    with pytest.raises(ValueError, match="model.safetensors: missing"):
        ensure_level_builds(levels, models, log=lambda _: None, build=never)


def test_every_generation_of_the_mechanism_study_has_one_budget_above_the_longest_level_response():
    from opct_lab.study.config import family_experiment

    study = load_study(MECHANISM)
    budgets = set()
    for family in study.families:
        e = family_experiment(study, family)
        budgets |= {e.train["opct"]["sampling"]["max_new_tokens"], e.train["bct"]["targets"]["max_new_tokens"],
                    e.train["validation"]["samples"]["max_new_tokens"], e.train["validation"]["answers"]["max_new_tokens"],
                    e.eval.generation.max_new_tokens, e.attack.generation.max_new_tokens}
    # docs/mechanism.md: the longest response a level's corpus writes is 69 tokens (w16-long), 66 (w4-long)
    assert budgets == {96}
    # and every eval task answers at that budget: a task's own cap must not cut it (the study's first run was
    # cut at 48 by the organism tasks' cap: docs/mechanism.md, "A deviation found after the results")
    from opct.evals.identity import task_params
    from opct.experiments.runner import experiment_eval_tasks
    from opct.sampling.engine import SamplingParams

    e = family_experiment(study, "w16-long.llama")
    asked = SamplingParams.from_config(e.eval.generation, seed=0)
    tasks = experiment_eval_tasks(e)
    assert {t.name for t in tasks} >= {"sycophancy", "jailbreak", "awareness", "capability_chain", "awareness_train"}
    assert {t.name: task_params(t, asked).max_new_tokens for t in tasks} == {t.name: 96 for t in tasks}
    # and every training run the study plans, the sharpness variants included, generates at that budget
    from opct.experiments.runner import resolve

    runs = resolve(family_experiment(study, "w4-long.llama")).runs
    assert {r.key for r in runs} == {f"{m}-s{s}" for m in ("bct", "opct", "bct-sampled", "opct-sharp") for s in (0, 1, 2)}
    for r in runs:
        found = json.dumps(r.config.model_dump(mode="json"))
        assert '"max_new_tokens": 96' in found and '"max_new_tokens": 48' not in found, r.key


def test_the_study_selection_is_the_projects_selection_at_the_study_budget():
    """docs/mechanism.md "Selection protocol": organism_selection.yaml's BCT and OPCT grids, steps, seeds,
    validation and rules, the per-family selections' family attack (budget 24, top 1), and 96 new tokens in
    every generation a candidate, its validation or the family attack makes."""
    from opct_lab.selection.run import candidate_configs, load_selection

    project = load_selection(STUDIES / "organism_selection.yaml")
    study = load_selection(STUDIES / "organism_mechanism_selection.yaml",
                           ["model.name_or_path=organism-qwen3"])
    p, s = project.selection.model_dump(), study.selection.model_dump()
    assert s["grid"] == {m: p["grid"][m] for m in ("bct", "opct")}
    assert {k: v for k, v in s.items() if k not in ("grid", "validation", "family_attack")} == \
           {k: v for k, v in p.items() if k not in ("grid", "validation", "family_attack")}
    at_96 = json.loads(json.dumps(p["validation"]).replace('"max_new_tokens": 48', '"max_new_tokens": 96'))
    assert s["validation"] == at_96
    assert s["family_attack"] == {**p["family_attack"], "budget": 24, "top": 1, "max_new_tokens": 96}
    runs = candidate_configs(study)
    assert len(runs) == 32 and {r.model.name_or_path for _, _, _, r in runs} == {"organism-qwen3"}
    for _, method, _, run in runs:
        tree = run.model_dump(mode="json")
        found = json.dumps(tree)
        assert '"max_new_tokens": 96' in found and '"max_new_tokens": 48' not in found, method
        assert tree["train"]["max_steps"] == 180


def test_a_models_profile_reads_as_the_studys_dose_per_axis_and_as_their_mean():
    from opct.report.dose_response import dose_summary, primary_dose

    full = profile(2.5)
    full["axes"]["awareness"]["measures"]["target_seq_logprob"]["value"] = -1.0  # awareness's gap is 1.0
    line = dose_summary(full)
    assert "awareness +1.000, jailbreak +2.500, sycophancy +2.500" in line
    dose = primary_dose({"model": full})
    assert dose.value == pytest.approx(2.0)
    assert f"dose (their mean, docs/mechanism.md) +2.000 [{dose.ci_low:+.3f}, {dose.ci_high:+.3f}]" in line
    one = {"axes": {"sycophancy": full["axes"]["sycophancy"]}}  # a user's pairs on one axis
    line = dose_summary(one)
    assert "sycophancy +2.500" in line and "missing: jailbreak, awareness" in line and "dose (their mean" not in line
    cut = {"axes": {**full["axes"], "jailbreak": {"measures": {"own_seq_logprob": {"value": -3.0}}}}}
    line = dose_summary(cut)
    assert "jailbreak not measured" in line and "each with both log-probs" in line


def test_the_studys_sharpness_variants_are_the_sharpness_studys_at_the_study_budget():
    """organism_mechanism.yaml writes organism_sharpness.yaml's two variants out again (their files extend the demo
    separately); they may differ only in BCT's target budget, 48 there and 96 here."""
    import yaml

    def variants(name: str) -> dict:
        return yaml.safe_load((STUDIES / name).read_text(encoding="utf-8"))["variants"]

    sharpness = json.loads(json.dumps(variants("organism_sharpness.yaml")).replace('"max_new_tokens": 48', '"max_new_tokens": 96'))
    assert variants("organism_mechanism.yaml") == sharpness


def test_the_studys_runs_train_their_picks_without_validation_curves():
    """docs/mechanism.md, amendment of 2026-11-29: the study's runs do not validate while training (which never
    changes the weights, tests/test_validation.py); everything else of a run is its family's pick."""
    from opct.experiments.runner import resolve
    from opct_lab.study.config import family_experiment, family_recipes

    study = load_study(MECHANISM)
    for family in study.families:
        runs = resolve(family_experiment(study, family)).runs
        assert runs and all(r.config.validation.every is None and not r.config.data.validation for r in runs), family
        if family in study.family_picks:  # the selected recipe, steps included, is what trains
            _, picks = family_recipes(study, family)
            for r in runs:  # a variant trains its parent method's pick
                assert r.config.train.max_steps == picks[r.config.method]["train"]["max_steps"], r.key
                assert r.config.optim.lr == picks[r.config.method]["optim"]["lr"], r.key
