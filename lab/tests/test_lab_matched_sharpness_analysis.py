"""The matched-sharpness study's pre-registered analysis (docs/matched_sharpness.md) on fabricated study folders:
each reading is forced by constructed numbers, and INCOMPLETE evals and collapse warnings force "not resolved"."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from report_fixtures import metric, write

from opct.errors import OpctError
from opct.stats.estimate import Estimate
from opct.stats.paired import PooledDifference
from opct_lab.layout import STUDY_FILE
from opct_lab.report.matched_sharpness import (
    NOT_RESOLVED,
    ON_POLICY_HELPS,
    ON_POLICY_HURTS,
    SHARPNESS,
    analyse,
    interaction,
)
from opct_lab.report.matched_sharpness_md import analysis_markdown

REPO = Path(__file__).resolve().parents[2]
LEVELS = {"w1-short": ("w1-short.llama", "w1-short.qwen3"), "w4-long": ("w4-long.llama", "w4-long.qwen3")}
SEEDS = (0, 1)
UNITS = 40
#: A resample count small enough for the shared cores; the pre-registered 2,000 runs in the script's test.
FAST = 300


def fabricate_family(root: Path, arms: dict[str, tuple[int, int]], collapsed: str | None = None,
                     unfinished: str | None = None) -> None:
    """One family's experiment. ``arms``: per method, (behaviours of 40 it defends, facts of 40 it knows): a method
    defends behaviours ``0..n-1`` and passes every perturbation of facts ``0..k-1`` (so two methods' paired
    difference is the units between them). ``collapsed``: a run whose rollout entropy rises tenfold;
    ``unfinished``: a run whose attack stopped before its results."""
    keys = ["base", *(f"{m}-s{s}" for m in arms for s in SEEDS)]
    write(root / "plan.json", {"name": root.name, "model": "organism", "methods": keys, "seeds": list(SEEDS)})
    for key in keys:
        method = key.rsplit("-s", 1)[0] if key != "base" else "base"
        defended, known = arms.get(method, (10, 10))
        behaviors = [{"behavior_id": f"b{i}", "cracked": i >= defended} for i in range(UNITS)]
        attack = {"n": UNITS, "behaviors": behaviors, "metrics": {"dsr": metric(defended / UNITS, UNITS)},
                  "outcomes": {"behaviors": {"unscored": 0}}}
        if key == unfinished:
            del attack["metrics"]
        write(root / "attack" / key / "results.json", attack)
        recs = [{"variant": f"p{v}", "outcome": "scored", "meta": {"fact": f"f{f}"}, "scores": {"pass": float(f < known)}}
                for f in range(UNITS) for v in range(2)]
        write(root / "eval" / key / "awareness" / "samples.jsonl", recs)
        write(root / "eval" / key / "awareness" / "results.json", {"metrics": {"ausc_9": metric(known / UNITS, UNITS)}})
        if key == "base":
            continue
        on_policy = method.startswith("opct")
        rows = []
        for step in range(1, 21):
            row = {"step": step, "entropy": 0.4, "truncation_rate": 0.1}
            if on_policy:
                row["kl_to_teacher"] = 0.2
                if key == collapsed and step > 10:
                    row["entropy"] = 5.0
            rows.append(row)
        write(root / "train" / key / "metrics.jsonl", rows)
        write(root / "train" / key / "kl_to_base.json", {"answers": 100, "truncated": 0,
                                                         "kl_per_sequence": {"value": 2.0 if on_policy else 1.0}})


def fabricate_study(root: Path, per_level: dict[str, dict[str, tuple[int, int]]], levels=LEVELS, **marks: str) -> Path:
    """A study folder with ``per_level[level]``'s arms in every family of that level; ``marks`` as
    :func:`fabricate_family`'s, ``family/run``."""
    families = [f for names in levels.values() for f in names]
    write(root / STUDY_FILE, {"name": "matched", "families": {f: f"organism-{f}" for f in families},
                              "seeds": list(SEEDS), "experiments": {f: f for f in families},
                              "levels": {lv: list(names) for lv, names in levels.items()}})
    for level, names in levels.items():
        for family in names:
            own = {k: v.split("/", 1)[1] for k, v in marks.items() if v.split("/", 1)[0] == family}
            fabricate_family(root / family, per_level[level], **own)
    return root


#: L1: every arm equal. L3: OPCT defends 16 more behaviours and knows 16 more facts than BCT-sampled.
EQUAL = {"bct": (20, 20), "bct-t10": (20, 20), "opct": (20, 20)}
HELPS = {"w1-short": EQUAL, "w4-long": {"bct": (20, 20), "bct-t10": (20, 20), "opct": (36, 36)}}


def test_on_policy_helps_is_read_when_opct_pulls_ahead_at_l3(tmp_path):
    data = analyse(fabricate_study(tmp_path, HELPS), n_resamples=FAST)
    part = data["tau_1.0"]
    assert part["reading"]["outcome"] == ON_POLICY_HELPS
    d3 = part["levels"]["w4-long"]["D"]["dsr_adaptive"]
    assert d3["value"] == pytest.approx(16 / UNITS) and d3["ci_low"] > 0
    assert part["levels"]["w1-short"]["seed"] == 47 and part["levels"]["w4-long"]["seed"] == 48
    i = part["interaction"]["dsr_adaptive"]
    assert i["value"] == pytest.approx(16 / UNITS)
    assert i["resamples_used"] == i["resamples"] == FAST
    assert i["ci975"][0] <= i["ci95"][0] <= i["value"] <= i["ci95"][1] <= i["ci975"][1] and i["ci975"][0] > 0
    assert any("I 97.5%" in c for c in part["reading"]["conditions"])
    # secondary: greedy BCT against both arms, KL per arm and level, every OPCT run's entropy first → last
    assert part["bct − opct"]["w4-long"]["dsr_adaptive"]["value"] == pytest.approx(-16 / UNITS)
    assert part["bct − bct-t10"]["w4-long"]["dsr_adaptive"]["value"] == pytest.approx(0.0)
    assert part["kl_to_base"]["w1-short"]["opct"] == {"mean_kl": 2.0, "runs": 4, "incomplete": []}
    assert len(part["health"]["opct"]) == 8 and not any(r["collapsed"] for r in part["health"]["opct"])
    assert part["health"]["opct"][0]["entropy"] == pytest.approx([0.4, 0.4])
    assert "Reading: on-policy helps" in analysis_markdown(data)


def test_nothing_different_is_not_resolved(tmp_path):
    data = analyse(fabricate_study(tmp_path, {"w1-short": EQUAL, "w4-long": EQUAL}), n_resamples=FAST)
    reading = data["tau_1.0"]["reading"]
    assert reading["outcome"] == NOT_RESOLVED
    assert "no reading's conditions all hold" in reading["reasons"]


def test_sharpness_is_read_when_softening_costs_bct_and_nothing_else_moves(tmp_path):
    per_level = {"w1-short": EQUAL, "w4-long": {"bct": (36, 20), "bct-t10": (20, 20), "opct": (20, 20)}}
    assert analyse(fabricate_study(tmp_path, per_level), n_resamples=FAST)["tau_1.0"]["reading"]["outcome"] == SHARPNESS


def test_on_policy_hurts_is_read_when_opct_falls_behind_at_l3(tmp_path):
    per_level = {"w1-short": EQUAL, "w4-long": {"bct": (36, 20), "bct-t10": (36, 20), "opct": (20, 20)}}
    reading = analyse(fabricate_study(tmp_path, per_level), n_resamples=FAST)["tau_1.0"]["reading"]
    assert reading["outcome"] == ON_POLICY_HURTS and "dsr_adaptive" in reading["reasons"][0]


def test_a_collapse_warning_forces_not_resolved_and_names_the_run(tmp_path):
    root = fabricate_study(tmp_path, HELPS, collapsed="w4-long.qwen3/opct-s1")
    part = analyse(root, n_resamples=FAST)["tau_1.0"]
    assert part["reading"]["outcome"] == NOT_RESOLVED
    assert part["reading"]["collapsed"] == ["w4-long.qwen3/opct-s1"]
    flagged = [r for r in part["health"]["opct"] if r["collapsed"]]
    assert [r["run"] for r in flagged] == ["opct-s1"] and flagged[0]["entropy"] == pytest.approx([0.4, 5.0])
    sens = part["sensitivity_without_collapsed"]
    assert sens["label"] == "sensitivity check, not the reading" and sens["left_out"] == ["w4-long.qwen3/opct-s1"]
    assert sens["D"]["w4-long"]["dsr_adaptive"]["cells"] == 3  # the collapsed run's cell is left out
    assert part["levels"]["w4-long"]["D"]["dsr_adaptive"]["cells"] == 4


def test_an_incomplete_primary_metric_forces_not_resolved(tmp_path):
    root = fabricate_study(tmp_path, HELPS, unfinished="w4-long.llama/opct-s0")
    part = analyse(root, n_resamples=FAST)["tau_1.0"]
    assert part["reading"]["outcome"] == NOT_RESOLVED
    assert part["reading"]["incomplete"] == ["dsr_adaptive at w4-long"]
    assert "INCOMPLETE" in part["reading"]["reasons"][0]


def test_interaction_leaves_out_resamples_where_a_level_has_no_value():
    est = Estimate(0.1, 0.0, 0.2, 10, "pooled-paired-bootstrap", 10)
    l1 = PooledDifference(est, 1, draws=np.array([0.0, np.nan, 0.1, 0.2]))
    l3 = PooledDifference(Estimate(0.5, 0.4, 0.6, 10, "pooled-paired-bootstrap", 10), 1,
                          draws=np.array([0.5, 0.5, np.nan, 0.6]))
    i = interaction(l1, l3)
    assert i["resamples_used"] == 2 and i["resamples"] == 4
    assert i["value"] == pytest.approx(0.4)
    assert i["ci95"][0] == pytest.approx(0.4)  # widened to contain the point (both draws are 0.4 and 0.5)
    assert math.isclose(i["ci95"][1], 0.4 + 0.1 * 0.975, rel_tol=1e-9)


def test_tau_05_reads_its_own_arms_and_pairs_bct_across_folders(tmp_path):
    main = fabricate_study(tmp_path / "main", HELPS)
    qwen3 = {lv: (names[1],) for lv, names in LEVELS.items()}
    t05 = fabricate_study(tmp_path / "t05", {"w1-short": {"bct-t05": (20, 20), "opct-t05": (20, 20)},
                                             "w4-long": {"bct-t05": (28, 20), "opct-t05": (20, 20)}}, levels=qwen3)
    data = analyse(main, t05, n_resamples=FAST)
    part = data["tau_0.5"]
    assert part["arms"] == ["opct-t05", "bct-t05"]
    assert part["levels"]["w4-long"]["D"]["dsr_adaptive"]["value"] == pytest.approx(-8 / UNITS)
    # bct (main folder, 20 defended) − bct-t05 (t05 folder, 28), seed by seed
    cross = part["bct − bct-t05"]["w4-long"]["dsr_adaptive"]
    assert cross["value"] == pytest.approx(-8 / UNITS) and cross["cells"] == 2
    assert data["readings_differ"] is True and data["tau_1.0"]["reading"]["outcome"] == ON_POLICY_HELPS


def _script():
    spec = importlib.util.spec_from_file_location("msa", REPO / "benchmarks" / "matched_sharpness_analysis.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_runs_the_preregistered_resamples_and_writes_json_and_markdown(tmp_path, capsys):
    root = fabricate_study(tmp_path / "study", HELPS)
    out_json, out_md = tmp_path / "a.json", tmp_path / "a.md"
    assert _script().main([str(root), "--json", str(out_json), "--md", str(out_md)]) == 0
    data = json.loads(out_json.read_text())
    assert data["resamples"] == 2000 and data["tau_1.0"]["interaction"]["awareness"]["resamples"] == 2000
    assert data["tau_1.0"]["reading"]["outcome"] == ON_POLICY_HELPS
    assert out_md.read_text() in capsys.readouterr().out


def test_a_folder_without_two_levels_is_a_clear_error(tmp_path):
    write(tmp_path / STUDY_FILE, {"name": "x", "families": {}, "levels": {"only": []}})
    with pytest.raises(OpctError, match="exactly two levels"):
        analyse(tmp_path)
    assert _script().main([str(tmp_path / "nowhere")]) == 2


def test_tau_05_against_a_reference_folder_of_bct_alone_keeps_an_earlier_tau_1(tmp_path):
    """Deviation 4: τ = 0.5 paired with a folder holding only the τ = 1.0 file's bct runs on qwen3 gives what the
    whole τ = 1.0 folder gives, and τ = 1.0 is kept from the earlier analysis JSON, not recomputed."""
    main = fabricate_study(tmp_path / "main", HELPS)
    qwen3 = {lv: (names[1],) for lv, names in LEVELS.items()}
    t05_arms = {"w1-short": {"bct-t05": (20, 20), "opct-t05": (24, 20)}, "w4-long": {"bct-t05": (28, 20), "opct-t05": (20, 26)}}
    t05 = fabricate_study(tmp_path / "t05", t05_arms, levels=qwen3)
    reference = fabricate_study(tmp_path / "ref", {lv: {"bct": HELPS[lv]["bct"]} for lv in LEVELS}, levels=LEVELS)
    for family in ("w1-short.llama", "w4-long.llama"):  # the reference run trains qwen3's families alone
        for path in sorted((reference / family).rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (reference / family).rmdir()
    whole = analyse(main, t05, n_resamples=FAST)
    earlier = tmp_path / "analysis.json"
    earlier.write_text(json.dumps({**analyse(main, n_resamples=2000), "tau_0.5": "stale"}))
    out = tmp_path / "new.json"
    script = _script()
    assert script.main([str(reference), "--t05-dir", str(t05), "--tau-1-from", str(earlier), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["tau_1.0"] == json.loads(earlier.read_text())["tau_1.0"] and data["tau_1.0_from"] == str(earlier)
    assert data["reference"] == str(reference)
    for key in ("bct − bct-t05", "bct − opct-t05"):
        for level in LEVELS:
            got, want = data["tau_0.5"][key][level]["dsr_adaptive"], whole["tau_0.5"][key][level]["dsr_adaptive"]
            assert got["value"] == pytest.approx(want["value"]) and got["cells"] == want["cells"] == 2
    for level in LEVELS:  # the tested estimate does not involve the reference at all
        for metric_key in ("dsr_adaptive", "awareness"):
            got, want = data["tau_0.5"]["levels"][level]["D"][metric_key], whole["tau_0.5"]["levels"][level]["D"][metric_key]
            assert got["value"] == pytest.approx(want["value"])
    assert data["readings_differ"] == (data["tau_0.5"]["reading"]["outcome"] != data["tau_1.0"]["reading"]["outcome"])


def test_tau_1_from_needs_the_t05_folder_and_an_analysis_json(tmp_path, capsys):
    script = _script()
    with pytest.raises(SystemExit):
        script.main([str(tmp_path), "--tau-1-from", str(tmp_path / "a.json")])
    bad = tmp_path / "a.json"
    bad.write_text(json.dumps({"resamples": 10}))
    t05 = fabricate_study(tmp_path / "t05", {"w1-short": {"bct-t05": (20, 20)}, "w4-long": {"bct-t05": (20, 20)}},
                          levels={lv: (names[1],) for lv, names in LEVELS.items()})
    assert script.main([str(t05), "--t05-dir", str(t05), "--tau-1-from", str(bad)]) == 2
    assert "not an analysis of this script" in capsys.readouterr().err


def _part(i975: tuple[float, float], d_l3: tuple[float, float]) -> dict:
    """One τ's part of an analysis.json: awareness's interaction and D at L3 as given, adaptive defense null."""
    def d(ci: tuple[float, float]) -> dict:
        return {"value": sum(ci) / 2, "ci_low": ci[0], "ci_high": ci[1], "incomplete": []}
    null = (-0.05, 0.05)
    return {"arms": ["opct", "bct-t10"],
            "levels": {"w1-short": {"D": {"dsr_adaptive": d(null), "awareness": d(null)}},
                       "w4-long": {"D": {"dsr_adaptive": d(null), "awareness": d(d_l3)}}},
            "interaction": {"dsr_adaptive": {"ci95": list(null), "ci975": list(null), "resamples_used": 10},
                            "awareness": {"ci95": [i975[0] + 0.01, i975[1] - 0.0005], "ci975": list(i975),
                                          "resamples_used": 10}},
            "bct − bct-t10": {"w4-long": {"dsr_adaptive": d((0.1, 0.2))}}, "reading": {"collapsed": []}}


def test_the_text_reads_a_resolved_fall_with_d_at_l3_not_resolved_as_not_resolved():
    """The text lists "a resolved interaction with D_L3 not resolved" under "Not resolved", in either direction;
    the code as run applied it only above 0 (issue 71). A fall with D_L3 resolved below 0 reads hurts under both."""
    from opct_lab.report.matched_sharpness import reread

    unresolved_l3 = _part((-0.095, -0.001), (-0.063, 0.006))
    assert reread(unresolved_l3, rule="as run")["outcome"] == ON_POLICY_HURTS
    written = reread(unresolved_l3, rule="as written")
    assert written["outcome"] == NOT_RESOLVED and "falls with diversity on awareness" in written["reasons"][0]
    resolved_l3 = _part((-0.095, -0.001), (-0.063, -0.002))
    assert reread(resolved_l3, rule="as run")["outcome"] == reread(resolved_l3)["outcome"] == ON_POLICY_HURTS
    with pytest.raises(ValueError, match="rule must be one of"):
        reread(resolved_l3, rule="lenient")


def test_the_committed_analysis_gives_its_published_reading_back_and_the_amended_one_beside_it():
    from opct_lab.report.matched_sharpness import reread

    data = json.loads((REPO / "benchmarks" / "results" / "matched_sharpness" / "analysis.json").read_text())
    for tau in ("tau_1.0", "tau_0.5"):
        part = data[tau]
        assert reread(part, rule="as run")["outcome"] == part["reading"]["outcome"]
        assert reread(part, rule="as written")["outcome"] == part["reading_as_written"]["outcome"]
    assert data["tau_1.0"]["reading"]["outcome"] == ON_POLICY_HURTS
    assert data["tau_1.0"]["reading_as_written"]["outcome"] == NOT_RESOLVED
