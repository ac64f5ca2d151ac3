"""The trend test's inputs kept as a file (lab/opct_lab/report/trend_inputs.py): read back, they give the study
report's trends and reading; one level replaced by another folder's runs gives what a study with those runs gives."""

from __future__ import annotations

import json

import pytest
from report_fixtures import write
from test_lab_study_levels import LEVELS, fabricate_family, fabricate_level_study, profile

from opct_lab.layout import STUDY_FILE
from opct_lab.report.levels import levels_data, profile_path
from opct_lab.report.study import load_study_dir
from opct_lab.report.trend_inputs import level_inputs, replace_level, trends_from_inputs

FAST = 300


def report_trends(root):
    study, families = load_study_dir(root)
    data = levels_data(root, study["levels"], families, n_resamples=FAST)
    return {t["key"]: t for t in data["trends"]}, data["hypothesis"]


def inputs_of(root, **kwargs):
    study, families = load_study_dir(root)
    return json.loads(json.dumps(level_inputs(root, study["levels"], families, n_resamples=FAST, **kwargs)))


def test_inputs_read_back_give_the_reports_trends_and_reading(tmp_path):
    root = fabricate_level_study(tmp_path / "study")
    trends, hypothesis = report_trends(root)
    again = trends_from_inputs(inputs_of(root))
    assert again["hypothesis"] == hypothesis
    for key, t in trends.items():
        got = again["trends"][key]
        assert got["beta"] == pytest.approx(t["beta"], nan_ok=True)
        assert got["ci"] == pytest.approx(t["ci"], nan_ok=True) and got["reading"] == t["reading"]
        assert got["reading_bonferroni"] == t["reading_bonferroni"]
    assert again["trends"]["dsr_adaptive"]["beta"] == pytest.approx(0.1)


def test_a_level_replaced_by_another_folders_runs_gives_that_studys_trend(tmp_path):
    root = fabricate_level_study(tmp_path / "study")
    # The same study with w4-long's runs trained again: OPCT now defends as at index 0 (no gain over BCT)
    other = fabricate_level_study(tmp_path / "other")
    for family in LEVELS["w4-long"][0]:
        for path in sorted((other / family).rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        fabricate_family(other / family, 0)
    expected_trends, expected_hypothesis = report_trends(other)
    # w4-long alone, in a folder of its own, seeded with its index in the whole study
    alone = tmp_path / "alone"
    names = LEVELS["w4-long"][0]
    write(alone / STUDY_FILE, {"name": "l4", "families": {f: f for f in names}, "experiments": {f: f for f in names},
                               "seeds": [0, 1], "levels": {"w4-long": list(names)}})
    for family in names:
        fabricate_family(alone / family, 0)
        write(profile_path(alone, family), profile(LEVELS["w4-long"][1]))
    new = inputs_of(alone, indices={"w4-long": 2})
    replaced = trends_from_inputs(replace_level(inputs_of(root), new, "w4-long"))
    assert replaced["hypothesis"] == expected_hypothesis
    for key, t in expected_trends.items():
        assert replaced["trends"][key]["beta"] == pytest.approx(t["beta"], nan_ok=True)
        assert replaced["trends"][key]["ci"] == pytest.approx(t["ci"], nan_ok=True)
    assert replaced["trends"]["dsr_adaptive"]["beta"] != pytest.approx(0.1)
    with pytest.raises(ValueError, match="seeded as the study's"):
        replace_level(inputs_of(root), inputs_of(alone), "w4-long")  # index 0: another bootstrap
    with pytest.raises(ValueError, match="format"):
        trends_from_inputs({"format": 0, "levels": []})


def test_the_script_exports_and_reads_with_a_level_replaced(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "trend_inputs.py"
    spec = importlib.util.spec_from_file_location("trend_inputs_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    root = fabricate_level_study(tmp_path / "study")
    out = tmp_path / "inputs.json"
    assert script.main(["export", str(root), str(out)]) == 0
    assert json.loads(out.read_text())["resamples"] == 2000
    packed = tmp_path / "inputs.json.gz"
    assert script.main(["export", str(root), str(packed)]) == 0
    assert script.load(packed) == script.load(out) and packed.stat().st_size < out.stat().st_size
    assert script.main(["read", str(out), "--replace", "w4-long", str(packed), "--json", str(tmp_path / "t.json")]) == 0
    printed = capsys.readouterr().out
    assert "dsr_adaptive: β +0.1 95%" in printed and "hypothesis: supported" in printed
    assert script.main(["export", str(root), str(out), "--index", "w4-long=2"]) == 2
    assert "must name every level" in capsys.readouterr().err
