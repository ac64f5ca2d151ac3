"""The matched-sharpness study's published numbers: README.md and docs/matched_sharpness.md show what the committed
analysis (``benchmarks/results/matched_sharpness/analysis.json``) says, and the generator writes a fabricated
analysis's numbers, marks and wall times where a reader looks for them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from test_lab_matched_sharpness_analysis import HELPS, fabricate_study

from opct_lab.report.matched_sharpness import ON_POLICY_HELPS, analyse
from opct_lab.report.matched_sharpness_md import analysis_markdown

REPO = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("msr", REPO / "benchmarks" / "matched_sharpness_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_and_the_results_section_are_the_committed_analysis(capsys) -> None:
    assert _generator().main(["--check"]) == 0, capsys.readouterr().err


def test_the_readme_block_carries_the_reading_the_interaction_and_each_level(tmp_path) -> None:
    gen = _generator()
    data = analyse(fabricate_study(tmp_path, HELPS), n_resamples=200)
    block = gen.readme_block(data, gen.training_seeds(data))
    assert f"the reading is **{ON_POLICY_HELPS}**" in block
    # OPCT defends 16 more behaviours of 40 at L3 and as many as BCT-sampled at L1: I = +40 points, a rate
    assert "held-out adaptive defense I = **+40.0 pts**" in block
    assert "at L3, w4-long, +40.0 pts [+25.0, +52.5]" in block
    # awareness is a score, not a rate: written to 3 decimals, as the study report writes it
    assert "held-out awareness AUSC I = **+0.356**" in block
    assert "2 training seeds" in block and "200 resamples" in block
    assert "τ = 0.5" not in block  # no _t05 folder, no second reading
    # greedy-target BCT against both trained arms, on adaptive defense: every arm defends 20 at L1 and bct 20 at L3
    assert "`bct − bct-t10` w1-short +0.0 pts" in block and "`bct − opct` w1-short +0.0 pts" in block
    assert "w4-long -40.0 pts" in block  # bct − opct at L3


def test_the_tau_05_secondary_rows_across_folders_are_written_in_points(tmp_path) -> None:
    """τ = 0.5's ``bct`` reference is paired across folders: its records carry no report text, and the README
    still writes them as values with intervals, never as a dash."""
    from test_lab_matched_sharpness_analysis import LEVELS

    gen = _generator()
    main = fabricate_study(tmp_path / "main", HELPS)
    qwen3 = {lv: (names[1],) for lv, names in LEVELS.items()}
    t05 = fabricate_study(tmp_path / "t05", {"w1-short": {"bct-t05": (12, 20), "opct-t05": (20, 20)},
                                             "w4-long": {"bct-t05": (20, 20), "opct-t05": (20, 20)}}, levels=qwen3)
    data = analyse(main, t05, n_resamples=200)
    block = gen.readme_block(data, gen.training_seeds(data))
    assert "`bct − bct-t05` w1-short +20.0 pts [" in block and "`bct − opct-t05` w1-short +0.0 pts [" in block
    assert "— " not in block.split("As a second reading")[1]


def test_an_incomplete_level_is_marked_where_its_number_is_quoted(tmp_path) -> None:
    gen = _generator()
    data = analyse(fabricate_study(tmp_path, HELPS), n_resamples=200)
    data["tau_1.0"]["levels"]["w4-long"]["D"]["dsr_adaptive"]["incomplete"] = ["opct"]
    block = gen.readme_block(data, gen.training_seeds(data))
    assert "at L3, w4-long, +40.0 pts [+25.0, +52.5] INCOMPLETE" in block


def test_the_page_block_gives_each_files_wall_time_and_the_analysis(tmp_path) -> None:
    gen = _generator()
    data = analyse(fabricate_study(tmp_path / "study", HELPS), n_resamples=200)
    results = tmp_path / "results"
    results.mkdir()
    (results / "organism_matched_sharpness.time.txt").write_text("== part 1\n...\nwall_seconds 7384.2\n")
    block = gen.page_block(data, analysis_markdown(data), results)
    assert "`organism_matched_sharpness.yaml`: 2 h 3 min (7,384 s)" in block
    assert "`organism_matched_sharpness_t05.yaml`: no timing log (not run, or not finished)" in block
    assert "### τ = 1.0: opct − bct-t10" in block and "# Matched sharpness" not in block
    (results / "organism_matched_sharpness_t05.time.txt").write_text("a log that never says how long it took\n")
    with pytest.raises(SystemExit, match="wall_seconds"):
        gen.page_block(data, analysis_markdown(data), results)
