"""benchmarks/trend_readings_table.py: the trend test as published, from a re-run's inputs and with one level
replaced, side by side; the published table is read back exactly as the report wrote it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from report_fixtures import write
from test_lab_study_levels import LEVELS, fabricate_family, fabricate_level_study, profile
from test_lab_trend_inputs import FAST, inputs_of

from opct_lab.layout import STUDY_FILE
from opct_lab.report.levels import levels_data, levels_markdown, profile_path
from opct_lab.report.study import load_study_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import trend_inputs as inputs_script
import trend_readings_table as table_script


def report_markdown(root: Path) -> str:
    study, families = load_study_dir(root)
    return levels_markdown(levels_data(root, study["levels"], families, n_resamples=FAST))


def test_the_published_table_reads_back_as_the_inputs_compute_it(tmp_path):
    root = fabricate_level_study(tmp_path / "study")
    published = table_script.published_reading(report_markdown(root))
    computed = table_script.computed_reading(inputs_of(root))
    assert published["hypothesis"] == computed["hypothesis"]
    assert published["trends"] == computed["trends"]
    assert "Defense success (adaptive attacker) ↑" in published["trends"]


def test_the_script_sets_three_readings_and_both_runs_of_the_replaced_level_side_by_side(tmp_path, capsys):
    root = fabricate_level_study(tmp_path / "study")
    (tmp_path / "report.md").write_text(report_markdown(root), encoding="utf-8")
    inputs_script.save(tmp_path / "inputs.json.gz", inputs_of(root))
    # w4-long trained again in a folder of its own: OPCT defends as at the first level (no gain over BCT)
    alone, names = tmp_path / "alone", LEVELS["w4-long"][0]
    write(alone / STUDY_FILE, {"name": "l4", "families": {f: f for f in names}, "experiments": {f: f for f in names},
                               "seeds": [0, 1], "levels": {"w4-long": list(names)}})
    for family in names:
        fabricate_family(alone / family, 0)
        write(profile_path(alone, family), profile(LEVELS["w4-long"][1]))
    inputs_script.save(tmp_path / "other.json", inputs_of(alone, indices={"w4-long": 2}))
    code = table_script.main([str(tmp_path / "report.md"), str(tmp_path / "inputs.json.gz"), "--replace", "w4-long",
                              str(tmp_path / "other.json"), "--md", str(tmp_path / "t.md"), "--json", str(tmp_path / "t.json")])
    assert code == 0
    readings = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    assert list(readings) == ["published", "re-run", "re-run, w4-long replaced"]
    assert readings["published"]["trends"] == readings["re-run"]["trends"]
    adaptive = "Defense success (adaptive attacker) ↑"
    assert readings["re-run"]["trends"][adaptive]["beta"] == "+10.0"
    assert readings["re-run, w4-long replaced"]["trends"][adaptive]["beta"] != "+10.0"
    md = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert capsys.readouterr().out == md + "\n"
    assert "| metric | w1-short | w4-short | w4-long | w4-long (replaced) |" in md
    assert "re-run, w4-long replaced: β [95%]" in md and "**hypothesis**" in md
    assert table_script.main([str(tmp_path / "report.md"), str(tmp_path / "inputs.json.gz"), "--replace", "w4-long",
                              str(tmp_path / "other.json"), "--label", "on new picks", "--md", str(tmp_path / "t2.md")]) == 0
    named = (tmp_path / "t2.md").read_text(encoding="utf-8")
    assert "re-run, w4-long on new picks: β [95%]" in named and "| w4-long (on new picks) |" in named
    assert named.replace("on new picks", "replaced") == md


def test_a_report_without_a_trend_table_is_refused(tmp_path, capsys):
    root = fabricate_level_study(tmp_path / "study")
    inputs_script.save(tmp_path / "inputs.json", inputs_of(root))
    (tmp_path / "report.md").write_text("# a report\n\nno dose-response section\n", encoding="utf-8")
    assert table_script.main([str(tmp_path / "report.md"), str(tmp_path / "inputs.json")]) == 2
    assert "no trend table" in capsys.readouterr().err


def test_the_committed_readings_table_regenerates_and_is_the_one_in_the_docs(tmp_path):
    repo = Path(__file__).resolve().parents[2]
    rerun = repo / "benchmarks" / "results" / "mechanism" / "rerun"
    out = tmp_path / "t.md"
    assert table_script.main([str(repo / "benchmarks" / "results" / "mechanism" / "study-report.md"),
                              str(rerun / "trend-inputs.json.gz"), "--md", str(out)]) == 0
    committed = (rerun / "trend-readings.md").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed
    readings_table = committed.split("\n\n")[0].strip()
    assert readings_table in (repo / "docs" / "mechanism.md").read_text(encoding="utf-8")


def test_the_committed_amended_readings_table_regenerates_and_is_the_one_in_the_docs(tmp_path):
    repo = Path(__file__).resolve().parents[2]
    mechanism = repo / "benchmarks" / "results" / "mechanism"
    out = tmp_path / "t.md"
    assert table_script.main([str(mechanism / "study-report.md"), str(mechanism / "rerun" / "trend-inputs.json.gz"),
                              "--replace", "w16-long", str(mechanism / "amendment-a" / "trend-inputs-w16-long.json.gz"),
                              "--label", "on amendment (a)'s picks", "--md", str(out)]) == 0
    committed = (mechanism / "amendment-a" / "trend-readings.md").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed
    assert committed.split("\n\n")[0].strip() in (repo / "docs" / "mechanism.md").read_text(encoding="utf-8")
