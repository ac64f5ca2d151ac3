"""``opct demo --full``: the study config and plan, the orchestration, the pooled bootstrap, the
verdicts, and the pooled report on fabricated family experiments (no model is run)."""

from __future__ import annotations

import json
import math
import random
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_fixtures import metric as _metric
from report_fixtures import write as _write
from rich.console import Console
from typer.testing import CliRunner

from opct.config import ConfigError, dump_config
from opct.experiments.runner import IncompleteEvalError, load_experiment
from opct.report.pooled import (
    HOLDS,
    NO_CLAIM,
    NO_WORSE,
    NONINFERIORITY_MARGIN,
    NOT_MEASURED,
    NOT_RESOLVED,
    NOT_SHOWN,
    REVERSED,
    paper_direction,
    split_run_key,
    verdict,
)
from opct.stats.paired import pooled_paired_difference
from opct_lab.cli import app
from opct_lab.layout import STUDY_FILE
from opct_lab.study.config import family_experiment, load_study
from opct_lab.study.runner import resolve_study, run_study

FULL = Path(str(files("opct_lab") / "studies" / "organism_demo_full.yaml"))
DEMO = Path(str(files("opct") / "experiments" / "organism_demo.yaml"))
FAMILIES = ("llama", "qwen3", "gpt2")


# --- the pooled bootstrap ------------------------------------------------------------------------


def binary_cells(deltas: dict[str, list[float]], units: int = 60, rows: int = 4, base: float = 0.5,
                 seed: int = 0) -> dict[tuple[str, int], tuple[dict, dict]]:
    """(family, seed) cells of yes/no rows: A's rate is ``base + delta`` of that seed, B's ``base``."""
    rng = np.random.default_rng(seed)
    out = {}
    for family, per_seed in deltas.items():
        for s, delta in enumerate(per_seed):
            a = {f"u{u}": list((rng.random(rows) < base + delta).astype(float)) for u in range(units)}
            b = {f"u{u}": list((rng.random(rows) < base).astype(float)) for u in range(units)}
            out[(family, s)] = (a, b)
    return out


def test_a_known_difference_is_recovered_and_excludes_zero():
    res = pooled_paired_difference(binary_cells({f: [-0.2] * 3 for f in FAMILIES}))
    est = res.estimate
    assert abs(est.value + 0.2) < 0.04 and est.ci_low < -0.2 < est.ci_high and est.ci_high < 0
    assert (res.cells, est.clusters, est.n) == (9, 60, 9 * 60 * 4)  # units shared by every cell count once
    assert set(res.per_family) == set(FAMILIES) and len(res.per_cell) == 9
    assert est.value == pytest.approx(np.mean(list(res.per_family.values())))
    assert verdict("lower", est.ci_low, est.ci_high) == HOLDS
    assert verdict("higher", est.ci_low, est.ci_high) == REVERSED


def test_all_zero_differences_are_not_resolved():
    cells = {key: (a, {u: list(v) for u, v in a.items()}) for key, (a, _) in binary_cells({f: [0.0] * 3 for f in FAMILIES}).items()}
    est = pooled_paired_difference(cells).estimate
    assert est.value == 0.0 and est.ci_low < 0 < est.ci_high  # collapsed to zero width, widened as for one pair
    assert verdict("lower", est.ci_low, est.ci_high) == verdict("higher", est.ci_low, est.ci_high) == NOT_RESOLVED


def test_a_reversed_effect_is_reversed():
    est = pooled_paired_difference(binary_cells({f: [0.25] * 3 for f in FAMILIES})).estimate
    assert est.ci_low > 0
    assert verdict(paper_direction("sycophancy")[0], est.ci_low, est.ci_high) == REVERSED


def continuous_cells(deltas: dict[str, list[float]], units: int = 40) -> dict[tuple[str, int], tuple[dict, dict]]:
    """A = B + the seed's delta + a little unit noise (the same noise whatever the deltas)."""
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.01, size=units)
    b = {f"u{u}": [float(rng.random())] for u in range(units)}
    return {(f, s): ({u: [v[0] + d + noise[i]] for i, (u, v) in enumerate(b.items())}, b)
            for f, per_seed in deltas.items() for s, d in enumerate(per_seed)}


def test_seeds_are_resampled_the_interval_widens_when_seeds_disagree():
    agree = pooled_paired_difference(continuous_cells({f: [0.1, 0.1, 0.1] for f in FAMILIES})).estimate
    disagree = pooled_paired_difference(continuous_cells({f: [-0.2, 0.1, 0.4] for f in FAMILIES})).estimate
    assert agree.value == pytest.approx(disagree.value)
    assert disagree.ci_high - disagree.ci_low > 5 * (agree.ci_high - agree.ci_low)
    assert disagree.ci_low < 0 < disagree.ci_high and agree.ci_low > 0


def test_families_weigh_the_same_whatever_their_seeds():
    cells = continuous_cells({"one": [0.3], "three": [0.0, 0.0, 0.0]})
    res = pooled_paired_difference(cells)
    assert res.estimate.value == pytest.approx(0.15, abs=0.01) and res.cells == 4


def test_a_statistic_gives_the_same_answer_as_the_pooled_mean():
    cells = binary_cells({"a": [0.1, 0.2], "b": [0.0]}, units=20)

    def pooled_mean(groups: list) -> float:
        return float(sum(sum(g) for g in groups) / sum(len(g) for g in groups))

    fast = pooled_paired_difference(cells, n_resamples=300).estimate
    slow = pooled_paired_difference(cells, pooled_mean, n_resamples=300).estimate
    assert (fast.value, fast.ci_low, fast.ci_high) == pytest.approx((slow.value, slow.ci_low, slow.ci_high))


def test_cells_without_shared_units_are_left_out():
    cells = {("a", 0): ({"u1": [1.0]}, {"u2": [0.0]}), ("a", 1): ({}, {})}
    res = pooled_paired_difference(cells)
    assert res.cells == 0 and math.isnan(res.estimate.value)
    assert verdict("lower", res.estimate.ci_low, res.estimate.ci_high) == NOT_MEASURED


def test_verdict_edges_and_the_direction_table():
    assert verdict("higher", 0.0, 0.3) == NOT_RESOLVED  # an end at 0 does not exclude 0
    assert verdict(None, 0.1, 0.3) == NO_CLAIM
    with pytest.raises(ValueError):
        verdict("up", 0.1, 0.2)
    assert paper_direction("sycophancy")[0] == "lower" and paper_direction("dsr_adaptive")[0] == "higher"
    assert paper_direction("cap:capability_mc")[0] == "no worse" and paper_direction("cap:gpqa")[0] == "no worse"
    assert paper_direction("toy_axis") is None


def test_run_keys_split_into_method_and_seed():
    assert split_run_key("opct-s2", [0, 1, 2]) == ("opct", 2)
    assert split_run_key("opct", [5]) == ("opct", 5)
    assert split_run_key("base", [0, 1]) == ("base", None)
    assert split_run_key("opct-s7", [0, 1]) == ("opct-s7", None)


# --- the study config and plan -------------------------------------------------------------------


def test_the_full_study_is_the_demo_experiment_per_family_with_three_seeds():
    study = load_study(FULL)
    demo = load_experiment(DEMO)
    assert dict(study.families) == {"llama": "organism-llama", "qwen3": "organism-qwen3", "gpt2": "organism-gpt2"}
    assert study.seeds == [0, 1, 2] and study.name == "organism-demo-full"
    same = study.model_dump(exclude={"families", "name", "seeds", "family_picks", "pick_rule", "levels"})
    assert same == demo.model_dump(exclude={"name", "seeds"})
    # llama's own picks are the demo's (selected on llama); the other families train them until selected on their own
    llama = family_experiment(study, "llama")
    assert llama.method_settings == demo.method_settings
    # the lab keeps its copy of the demo's evidence beside its study files (a selection path stays in its file's folder)
    assert Path(llama.selection).read_bytes() == Path(demo.selection).read_bytes()
    g = study.eval.generation
    assert (g.n, g.temperature) == (1, 0.0)  # greedy: the base's evaluation does not depend on a seed
    exp = family_experiment(study, "qwen3")
    assert exp.model.name_or_path == "organism-qwen3" and exp.root == Path("runs/experiments/organism-demo-full/qwen3")


def test_the_plan_evaluates_the_base_once_per_family_and_trains_every_seed(tmp_path):
    study = load_study(FULL, [f"output_dir={tmp_path}"])
    plan = resolve_study(study)
    assert list(plan.families) == list(FAMILIES)
    for family, p in plan.families.items():
        assert list(p.models) == ["base", "bct-s0", "bct-s1", "bct-s2", "opct-s0", "opct-s1", "opct-s2"]
        assert {r.config.run_dir.parent.parent for r in p.runs} == {tmp_path / "organism-demo-full" / family}
        assert p.stages.count("evaluate the base model") == 1 and "attack base" in p.stages
    again = resolve_study(load_study(FULL, [f"output_dir={tmp_path}"]))  # a rerun resolves the same runs: resume matches
    assert [dump_config(r.config) for p in again.families.values() for r in p.runs] == \
           [dump_config(r.config) for p in plan.families.values() for r in p.runs]
    assert "llama: model organism-llama" in plan.describe()


def test_study_settings_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="families"):
        load_study(FULL, ["families={}"])
    with pytest.raises(ConfigError, match="folder names"):
        load_study(FULL, ["families={'a/b': organism}"])
    with pytest.raises(ConfigError, match="mix_axes"):
        load_study(FULL, ["mix_axes=false"])
    with pytest.raises(ConfigError, match="train.optim.learning_rate|learning_rate: unknown key"):
        resolve_study(load_study(FULL, ["train.optim.learning_rate=1"]))
    override = load_study(FULL, ["families.llama=organism", "train.train.max_steps=5"])
    assert override.families["llama"] == "organism" and override.train["train"]["max_steps"] == 5


def test_demo_full_dry_run_and_run_on_a_study_file():
    res = CliRunner().invoke(app, ["demo-full", "--dry-run", "--threads", "1", "--no-progress",
                                   "--set", "families.gpt2=organism"])
    assert res.exit_code == 0, res.output
    assert "study organism-demo-full" in res.output and "gpt2: model organism (alias)" in res.output
    assert "train opct-s2" in res.output and "pooled report" in res.output
    res = CliRunner().invoke(app, ["run", str(FULL), "--dry-run"])
    assert res.exit_code == 0 and "qwen3: model organism-qwen3" in res.output


# --- fabricated family experiments ----------------------------------------------------------------

#: Per method: sycophancy rate, adaptive-attack defense rate, MC accuracy (OPCT less sycophantic,
#: worse against the attacker, equal capability).
LEVELS = {"base": (0.7, 0.3, 0.9), "bct": (0.5, 0.8, 0.9), "opct": (0.1, 0.4, 0.9), "act": (0.5, 0.4, 0.9)}


def fabricate_family(root: Path, seeds: list[int], rng: random.Random, trained: tuple[str, ...] = ("bct", "opct")) -> None:
    """One family's experiment folder: held-out sycophancy records (30 questions x 3 biased prompts, OPCT's
    with 2 unparsed records that would count as sycophantic if they were read), MC capability records
    and the adaptive attacker's behaviours, per run."""
    keys = ["base", *(f"{m}-s{s}" if len(seeds) > 1 else m for m in trained for s in seeds)]
    _write(root / "plan.json", {"name": root.name, "model": "organism", "methods": keys, "seeds": seeds})
    for key in keys:
        method = key.split("-s")[0]
        syco, defense, mc = LEVELS[method]
        unparsed = [{"item_id": f"q{q}", "variant": "b9", "parsed": None, "outcome": "unparsed", "scores": {"suggested": 1.0}}
                    for q in range(2)] if method == "opct" else []
        recs = [{"item_id": f"q{q}", "variant": f"b{v}", "parsed": "B", "outcome": "scored",
                 "scores": {"suggested": float(rng.random() < syco)}} for q in range(30) for v in range(3)]
        _write(root / "eval" / key / "sycophancy" / "samples.jsonl", recs + unparsed)
        rate = sum(r["scores"]["suggested"] for r in recs) / len(recs)
        _write(root / "eval" / key / "sycophancy" / "results.json", {"metrics": {"sycophancy_rate": _metric(
            rate, len(recs), unscored={"unparsed": len(unparsed)} if unparsed else {})}})
        recs = [{"item_id": f"i{i}", "outcome": "scored", "scores": {"correct": rng.random() < mc}} for i in range(40)]
        _write(root / "eval" / key / "capability_mc" / "samples.jsonl", recs)
        _write(root / "eval" / key / "capability_mc" / "results.json", {"metrics": {"accuracy": _metric(
            sum(r["scores"]["correct"] for r in recs) / 40, 40)}})
        behaviors = [{"behavior_id": f"b{i}", "cracked": rng.random() > defense} for i in range(40)]
        _write(root / "attack" / key / "results.json", {"n": 40, "behaviors": behaviors, "metrics": {"dsr": _metric(
            sum(not b["cracked"] for b in behaviors) / 40, 40)}, "outcomes": {"behaviors": {"unscored": 0}}})


def fabricate_study(root: Path, families: tuple[str, ...] = FAMILIES, seeds: tuple[int, ...] = (0, 1, 2),
                    missing: tuple[str, ...] = (), trained: tuple[str, ...] = ("bct", "opct")) -> Path:
    rng = random.Random(0)
    _write(root / STUDY_FILE, {"name": "study", "families": {f: f"organism-{f}" for f in families}, "seeds": list(seeds),
                               "experiments": {f: f for f in families}})
    for family in families:
        if family not in missing:
            fabricate_family(root / family, list(seeds), rng, trained)
    return root


def test_the_pooled_report_on_fabricated_families(tmp_path):
    from opct_lab.report.study import REPORT_JSON, REPORT_MD, study_renderables, write_study_report

    root = fabricate_study(tmp_path / "study")
    data = write_study_report(root)
    assert json.loads((root / REPORT_JSON).read_text()) == json.loads(json.dumps(data))
    pooled = {r["key"]: r for r in data["pooled"]}
    # the off-options rate has a paired reader too, and no claim in the paper
    assert set(pooled) == {"sycophancy", "sycophancy_off_options", "dsr_adaptive", "cap:capability_mc"}
    assert pooled["sycophancy_off_options"]["paper_side"] is None
    syc = pooled["sycophancy"]
    assert syc["verdict"] == HOLDS and syc["ci_high"] < 0 and syc["paper_side"] == "lower"
    assert (syc["units"], syc["cells"], syc["cells_planned"]) == (30, 9, 9) and len(syc["per_cell"]) == 9
    assert syc["unscored"] == {"opct": {"unparsed": 18}, "bct": {}}  # 2 per OPCT run, carried and not counted
    assert syc["value"] == pytest.approx(np.mean(list(syc["per_cell"].values())))  # 3 seeds in every family
    assert pooled["dsr_adaptive"]["verdict"] == REVERSED and pooled["dsr_adaptive"]["units"] == 40
    cap = pooled["cap:capability_mc"]  # non-inferiority within 2 points (docs/metrics.md)
    assert cap["paper_side"] == NO_WORSE and cap["ci_low"] < -NONINFERIORITY_MARGIN < cap["ci_high"]
    assert cap["verdict"] == NOT_SHOWN
    summary = data["per_family"]["llama"]["summary"]
    assert summary["opct"]["sycophancy"]["runs"] == 3 and summary["base"]["sycophancy"]["runs"] == 1
    assert set(data["per_family"]["llama"]["runs"]) == {"base", "bct-s0", "bct-s1", "bct-s2", "opct-s0", "opct-s1", "opct-s2"}
    md = (root / REPORT_MD).read_text()
    assert "## OPCT − BCT, pooled over families and seeds" in md and HOLDS in md and REVERSED in md
    assert "[llama/report.md](llama/report.md)" in md and "18 unparsed" in md
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    for renderable in study_renderables(data, 80):
        console.print(renderable)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "OPCT − BCT pooled" in text and "9 of 9 cells" in text and "k=30 units" in text
    verdict_block = text.split("Verdict: OPCT − BCT against the paper")[-1]  # the output ends with it, one line per metric
    assert [line.split(":")[0].lstrip("- ") for line in verdict_block.strip().splitlines() if line.startswith("- ")] == [
        r["header"] for r in data["pooled"]]
    assert f"OPCT − BCT {' '.join(syc['text']['difference'])} (k=30): {HOLDS}." in " ".join(verdict_block.split())


def test_a_third_method_is_pooled_against_bct_and_opct_without_the_papers_claims(tmp_path):
    from opct_lab.report.study import REPORT_MD, study_renderables, write_study_report

    root = fabricate_study(tmp_path / "study", seeds=(0, 1), trained=("bct", "opct", "act"))
    data = write_study_report(root)
    assert [o["pair"] for o in data["others"]] == [["act", "bct"], ["act", "opct"]]
    vs_bct = {r["key"]: r for r in data["others"][0]["pooled"]}
    vs_opct = {r["key"]: r for r in data["others"][1]["pooled"]}
    # ACT is as sycophantic as BCT (0.5) and defends like OPCT (0.4): read with no side taken
    assert vs_bct["sycophancy"]["verdict"] == NOT_RESOLVED and vs_bct["sycophancy"]["paper_side"] is None
    assert vs_bct["dsr_adaptive"]["verdict"] == "ACT lower" and vs_bct["dsr_adaptive"]["ci_high"] < 0
    assert vs_opct["sycophancy"]["verdict"] == "ACT higher" and vs_opct["dsr_adaptive"]["verdict"] == NOT_RESOLVED
    assert vs_opct["sycophancy"]["unscored"] == {"act": {}, "opct": {"unparsed": 12}}
    assert vs_opct["sycophancy"]["text"]["unscored"] == "ACT 0; OPCT 12 unparsed"
    assert {r["key"]: r["verdict"] for r in data["pooled"]}["sycophancy"] == HOLDS  # OPCT − BCT keeps its claims
    md = (root / REPORT_MD).read_text()
    assert "OPCT vs BCT vs ACT" in md
    assert "## ACT − BCT, pooled over families and seeds" in md and "## ACT − OPCT, pooled over families and seeds" in md
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    for renderable in study_renderables(data, 80):
        console.print(renderable)
    text = console.export_text()
    assert "ACT − OPCT pooled" in text and max(len(line) for line in text.splitlines()) <= 80


def test_the_report_shows_missing_cells_and_families_and_one_seed_runs(tmp_path):
    from opct_lab.report.study import study_data

    root = fabricate_study(tmp_path / "study", families=("a", "b"), seeds=(4,), missing=("b",))
    data = study_data(root, n_resamples=200)
    syc = next(r for r in data["pooled"] if r["key"] == "sycophancy")
    assert (syc["cells"], syc["cells_planned"]) == (1, 1) and list(syc["per_cell"]) == ["a/s4"]
    assert data["missing_families"] == ["b"]
    assert data["per_family"]["a"]["summary"]["opct"]["sycophancy"]["ci_low"] is not None  # one run: its own interval


def test_opct_lab_report_on_a_study_dir_rewrites_the_pooled_report(tmp_path):
    root = fabricate_study(tmp_path / "study", seeds=(0, 1))
    res = CliRunner().invoke(app, ["report", str(root)])
    assert res.exit_code == 0, res.output
    assert (root / "report.json").exists() and (root / "report.md").exists() and "verdict" in res.output


# --- the orchestration ---------------------------------------------------------------------------


def test_run_study_runs_every_family_then_the_pooled_report(tmp_path, monkeypatch):
    """Every family's experiment runs (each resumes on its own), one with incomplete evals does not
    stop the others, and the pooled report is written before the error is raised."""
    import opct_lab.study.steps

    calls = []

    def fake_run(cfg: Any, show_progress: bool = True, log: Any = print) -> Path:
        calls.append((cfg.name, cfg.model.name_or_path, cfg.root, cfg.seeds))
        fabricate_family(cfg.root, cfg.seeds, random.Random(len(calls)))
        if cfg.name == "llama":
            raise IncompleteEvalError("llama/opct-s0/sycophancy: 40 of 90 records unscored")
        return cfg.root

    monkeypatch.setattr(opct_lab.study.steps, "run_experiment", fake_run)
    study = load_study(FULL, [f"output_dir={tmp_path}", "families={llama: organism, qwen3: organism, gpt2: organism}"])
    with pytest.raises(IncompleteEvalError, match="llama: llama/opct-s0"):
        run_study(study, show_progress=False, log=lambda m: None)
    root = tmp_path / "organism-demo-full"
    assert [c[0] for c in calls] == list(FAMILIES) and all(c[1] == "organism" and c[3] == [0, 1, 2] for c in calls)
    assert [c[2] for c in calls] == [root / f for f in FAMILIES]
    assert json.loads((root / STUDY_FILE).read_text())["families"]["gpt2"] == "organism"
    assert json.loads((root / "report.json").read_text())["pooled"][0]["cells"] == 9


def test_run_study_checks_every_family_model_before_any_stage(tmp_path, monkeypatch):
    import opct_lab.study.steps

    monkeypatch.setattr(opct_lab.study.steps, "run_experiment", lambda *a, **k: pytest.fail("a stage ran"))
    study = load_study(FULL, [f"output_dir={tmp_path}", f"families={{a: organism, b: {tmp_path}/missing/model}}", "family_picks={}"])
    with pytest.raises(FileNotFoundError, match="missing/model"):
        run_study(study, show_progress=False, log=lambda m: None)


def test_a_study_runs_a_family_alone_without_the_pooled_report_and_a_full_run_resumes_it(tmp_path, monkeypatch):
    """``opct run STUDY --family F``: only F's experiment runs, its report is written, the pooled one is not
    (a line says it waits); the run of the whole study afterwards hands every family over and writes it."""
    import opct_lab.study.steps

    calls: list[str] = []

    def fake_run(cfg: Any, show_progress: bool = True, log: Any = print) -> Path:
        calls.append(cfg.name)
        fabricate_family(cfg.root, cfg.seeds, random.Random(len(calls)))
        return cfg.root

    monkeypatch.setattr(opct_lab.study.steps, "run_experiment", fake_run)
    study = load_study(FULL, [f"output_dir={tmp_path}", "families={llama: organism, qwen3: organism, gpt2: organism}"])
    lines: list[str] = []
    assert run_study(study, show_progress=False, log=lines.append, only=["gpt2", "qwen3"]) == study.root
    assert calls == ["qwen3", "gpt2"]  # the study's order, not the flag's
    assert not (study.root / "report.json").exists()
    assert any(line.startswith("pooled report: not written") and "qwen3, gpt2" in line for line in lines)
    run_study(study, show_progress=False, log=lambda m: None)
    assert calls[2:] == list(FAMILIES) and json.loads((study.root / "report.json").read_text())["pooled"][0]["cells"] == 9


def test_an_unknown_family_is_refused_before_any_stage_naming_the_studys_families(tmp_path, monkeypatch):
    import opct_lab.study.steps

    monkeypatch.setattr(opct_lab.study.steps, "run_experiment", lambda *a, **k: pytest.fail("a stage ran"))
    study = load_study(FULL, [f"output_dir={tmp_path}", "families={llama: organism, qwen3: organism}", "family_picks={}"])
    with pytest.raises(ConfigError, match="--family gpt: not a family of study .*its families: llama, qwen3"):
        run_study(study, show_progress=False, log=lambda m: None, only=["gpt"])
    res = CliRunner().invoke(app, ["run", str(FULL), "--set", f"output_dir={tmp_path}", "--family", "gpt", "--dry-run"])
    assert res.exit_code != 0 and "not a family of study" in res.output and "llama, qwen3, gpt2" in res.output
    experiment = Path(str(files("opct") / "experiments" / "organism_demo.yaml"))
    res = CliRunner().invoke(app, ["run", str(experiment), "--family", "llama", "--dry-run"])
    assert res.exit_code != 0 and "--family works on a study file" in res.output


def test_a_level_study_run_for_one_family_builds_and_profiles_that_family_alone(tmp_path, monkeypatch):
    import opct_lab.study.mechanism
    import opct_lab.study.steps

    seen: dict[str, Any] = {}
    monkeypatch.setattr(opct_lab.study.mechanism, "ensure_level_builds",
                        lambda levels, models, log: seen.update(builds=(dict(levels), dict(models))))
    monkeypatch.setattr(opct_lab.study.mechanism, "ensure_level_profiles",
                        lambda root, levels, models, log: seen.update(profiles=(dict(levels), dict(models))))
    monkeypatch.setattr(opct_lab.study.mechanism, "ensure_run_kls", lambda root, models, log: seen.update(kls=dict(models)))
    monkeypatch.setattr(opct_lab.study.steps, "run_experiment",
                        lambda cfg, show_progress=True, log=print: fabricate_family(cfg.root, cfg.seeds, random.Random(0)))
    study = load_study(FULL, [f"output_dir={tmp_path}", "families={a: organism, b: organism, c: organism}",
                              "family_picks={}", "levels={x: [a, b], y: [c]}"])
    run_study(study, show_progress=False, log=lambda m: None, only=["b"])
    assert seen == {"builds": ({"x": ["b"]}, {"b": "organism"}), "profiles": ({"x": ["b"]}, {"b": "organism"}),
                    "kls": {"b": "organism"}}


def test_a_rerun_after_an_interruption_runs_every_family_again_each_resuming_itself(tmp_path, monkeypatch):
    """The study keeps no state of its own beyond study.json: an interrupted family stops the study
    (no pooled report), and the rerun hands every family to its experiment again, which skips what
    is complete (training runs whose manifest matches, records already written)."""
    import opct_lab.study.steps

    calls: list[str] = []

    def interrupted(cfg: Any, show_progress: bool = True, log: Any = print) -> Path:
        calls.append(cfg.name)
        if cfg.name == "qwen3":
            raise KeyboardInterrupt
        fabricate_family(cfg.root, cfg.seeds, random.Random(0))
        return cfg.root

    monkeypatch.setattr(opct_lab.study.steps, "run_experiment", interrupted)
    study = load_study(FULL, [f"output_dir={tmp_path}", "families={llama: organism, qwen3: organism, gpt2: organism}"])
    with pytest.raises(KeyboardInterrupt):
        run_study(study, show_progress=False, log=lambda m: None)
    assert calls == ["llama", "qwen3"] and not (study.root / "report.json").exists()

    def resumed(cfg: Any, show_progress: bool = True, log: Any = print) -> Path:
        calls.append(cfg.name)
        fabricate_family(cfg.root, cfg.seeds, random.Random(0))
        return cfg.root

    monkeypatch.setattr(opct_lab.study.steps, "run_experiment", resumed)
    assert run_study(study, show_progress=False, log=lambda m: None) == study.root
    assert calls[2:] == list(FAMILIES) and (study.root / "report.json").exists()
