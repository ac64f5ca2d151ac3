"""Capability is read as non-inferiority (issue 59, item 5; docs/metrics.md): "OPCT no worse than BCT within
2 points", one-sided, with the verdicts holds / not shown / worse, and report.json, report.html, report.md,
the forest plot and the README's generator all say the same."""

from __future__ import annotations

import json
import math
import random
from html import unescape
from pathlib import Path

import pytest
from script_loader import load_script

from opct.report import load_experiment, write_report
from opct.report.forest import MARGIN_LABEL, plot_forest
from opct.report.paired import paired_differences
from opct.report.pooled import (
    NO_WORSE,
    NONINFERIOR,
    NONINFERIORITY_MARGIN,
    NOT_MEASURED,
    NOT_SHOWN,
    WORSE,
    WORSE_WITHIN_MARGIN,
    noninferiority_verdict,
    paper_direction,
    verdict,
)
from opct.report.table import build_table
from opct.report.verdict import SIDE_WORDS
from opct.runs.experiment_layout import REPORT_JSON, ExperimentLayout
from opct.testing.synthetic_experiment import make_experiment


@pytest.mark.parametrize(("low", "high", "original", "amended"), [
    (-0.019, 0.03, NONINFERIOR, NONINFERIOR),  # lower end above −2 points: no worse within the margin
    (0.01, 0.05, NONINFERIOR, NONINFERIOR),  # a gain is no worse too (no superiority claim)
    (-0.09, -0.021, WORSE, WORSE),  # upper end below −2 points
    (-0.031, 0.031, NOT_SHOWN, NOT_SHOWN),  # the interval holds −2 points
    (-0.02, 0.01, NOT_SHOWN, NOT_SHOWN),  # an end exactly at −m does not clear it
    (-0.05, -0.02, NOT_SHOWN, WORSE),  # wholly below 0, reaching past −m: a deficit the original rule hid
    (-0.048, -0.016, NOT_SHOWN, WORSE),  # the mechanism re-run's multi-step accuracy
    (-0.015, -0.002, NONINFERIOR, WORSE_WITHIN_MARGIN),  # a deficit shown, smaller than the margin
    (-0.015, 0.0, NONINFERIOR, NONINFERIOR),  # an upper end exactly at 0 is not below it
    (math.nan, math.nan, NOT_MEASURED, NOT_MEASURED),
])
def test_the_verdict_on_constructed_intervals(low: float, high: float, original: str, amended: str) -> None:
    assert NONINFERIORITY_MARGIN == 0.02  # the margin docs/metrics.md states
    assert noninferiority_verdict(low, high, rule="original") == original
    assert verdict(NO_WORSE, low, high, rule="original") == original
    assert noninferiority_verdict(low, high) == amended == verdict(NO_WORSE, low, high)


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="rule must be one of"):
        noninferiority_verdict(-0.01, 0.01, rule="lenient")


def test_the_margin_is_a_parameter_of_the_test() -> None:
    assert noninferiority_verdict(-0.04, 0.0, margin=0.05) == NONINFERIOR
    assert noninferiority_verdict(-0.04, 0.0, margin=0.02) == NOT_SHOWN
    assert noninferiority_verdict(-0.09, -0.06, margin=0.05) == WORSE


def test_capability_claims_no_worse_within_the_margin_and_safety_keeps_its_sides() -> None:
    side, claim = paper_direction("cap:capability_mc")
    assert side == NO_WORSE and paper_direction("cap:gpqa")[0] == NO_WORSE
    margin_words = f"within {NONINFERIORITY_MARGIN * 100:g} pts"
    assert margin_words in claim and "≥" not in claim and margin_words in SIDE_WORDS[NO_WORSE]
    assert paper_direction("dsr_adaptive")[0] == "higher" and paper_direction("sycophancy")[0] == "lower"


@pytest.fixture(scope="module")
def exp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic experiment with per-item capability_mc records: BCT answers all 200 items, OPCT 140, so OPCT
    is worse by far more than the margin."""
    exp = make_experiment(tmp_path_factory.mktemp("noninferiority") / "exp", samples=True)
    rng = random.Random(0)
    for method, share in (("bct", 1.0), ("opct", 0.7)):
        layout = ExperimentLayout(exp).eval(method)
        results = json.loads(layout.results("capability_mc").read_text(encoding="utf-8"))
        n = results["n_records"]
        rows = [{"item_id": f"i{i}", "outcome": "scored", "scores": {"correct": rng.random() < share}} for i in range(n)]
        layout.samples("capability_mc").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    write_report(exp)
    return exp


def test_report_json_html_md_and_the_forest_plot_agree_on_the_capability_verdict(exp_dir: Path) -> None:
    data = json.loads((exp_dir / REPORT_JSON).read_text(encoding="utf-8"))
    row = next(r for r in data["verdict"] if r["key"] == "cap:capability_mc")
    assert row["paper_side"] == NO_WORSE and row["ci_high"] < -NONINFERIORITY_MARGIN and row["verdict"] == WORSE
    assert not any(r["paper_side"] == "higher" for r in data["verdict"] if r["key"].startswith("cap:"))

    html = unescape((exp_dir / "report.html").read_text(encoding="utf-8"))
    item = next(li for li in html.split("<li ")[1:] if row["header"] in li.split("</li>")[0])
    assert f"paper: {SIDE_WORDS[NO_WORSE]}" in item and f">{WORSE}<" in item and 'class="reversed"' in item
    md = (exp_dir / "report.md").read_text(encoding="utf-8")
    assert f"- **{row['header']}**: paper {SIDE_WORDS[NO_WORSE]}; OPCT − BCT {row['text']}: **{WORSE}**" in md
    assert "OPCT ≥ BCT" not in html and "OPCT ≥ BCT" not in md

    exp = load_experiment(exp_dir)
    fig = plot_forest(paired_differences(exp, build_table(exp).columns))
    panel = next(ax for ax in fig.axes if ax.get_title() and "MC" in ax.get_title())
    dashed = [line for line in panel.get_lines() if line.get_linestyle() == "--"]
    assert [line.get_xdata()[0] for line in dashed] == [pytest.approx(-NONINFERIORITY_MARGIN * 100)]
    labels = [t.get_text() for t in panel.texts]
    assert MARGIN_LABEL.format(m=NONINFERIORITY_MARGIN * 100) in labels and "paper →" not in labels
    safety = next(ax for ax in fig.axes if ax.get_title() and "Defense success (adaptive" in ax.get_title())
    assert "paper →" in [t.get_text() for t in safety.texts]  # the safety metrics keep their arrow to a side of 0


def test_the_readme_generator_reads_capability_as_the_report_does() -> None:
    """A reference written before the margin (``paper_side: higher``, "not resolved") is shown as the report
    reads it now; its numbers are kept."""
    script = load_script("benchmarks/readme_results.py")
    old = {"key": "cap:capability_chain", "paper_side": "higher", "claim": "OPCT ≥ BCT: no capability cost",
           "verdict": "not resolved", "ci_low": -0.042, "ci_high": 0.0}
    assert script.current_reading(old) == (NO_WORSE, NOT_SHOWN)
    assert script.current_reading({**old, "ci_low": -0.006}) == (NO_WORSE, NONINFERIOR)
    reference = json.loads(script.REFERENCE.read_text(encoding="utf-8"))
    table = script.quick_demo_table(reference)
    for row in reference["verdict"]:
        if row["key"].startswith("cap:"):
            line = next(x for x in table.splitlines() if x.startswith(f"| {row['header']} |"))
            assert f"| {SIDE_WORDS[NO_WORSE]} |" in line and row["text"] in line
            assert line.endswith(f"| {noninferiority_verdict(row['ci_low'], row['ci_high'])} |")


def test_one_discordant_item_of_200_reads_not_shown_and_the_report_keeps_the_original_reading(
        tmp_path: Path) -> None:
    """BCT right on all 200 items, OPCT wrong on one: the bootstrap alone gave [−1.5, +0.0] points, narrower than
    perfect agreement's ±1.9, and read "holds"; the score interval is [−2.8, +1.4] and reads "not shown". Both
    readings are in report.json and report.md."""
    exp = make_experiment(tmp_path / "exp", samples=True)
    for method, wrong in (("bct", set()), ("opct", {0})):
        layout = ExperimentLayout(exp).eval(method)
        rows = [{"item_id": f"i{i}", "outcome": "scored", "scores": {"correct": i not in wrong}} for i in range(200)]
        layout.samples("capability_mc").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    write_report(exp)
    data = json.loads((exp / REPORT_JSON).read_text(encoding="utf-8"))
    row = next(r for r in data["verdict"] if r["key"] == "cap:capability_mc")
    assert row["verdict"] == NOT_SHOWN
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(-0.02777, abs=1e-4), pytest.approx(0.01394, abs=1e-4))
    before = row["before_amendment"]
    assert before["verdict"] == NONINFERIOR and before["method"] == "paired-cluster-bootstrap"
    assert before["ci_low"] == pytest.approx(-0.015) and before["ci_high"] == pytest.approx(0.0)
    md = (exp / "report.md").read_text(encoding="utf-8")
    assert "before the amendment of 2026-12-07: [-1.5, +0.0], holds" in md


def test_a_row_written_before_the_score_interval_is_read_on_its_narrowest_score_interval() -> None:
    """The full study's arithmetic row (−0.1 [−0.6, +0.0] on 120 items) read "holds" on the bootstrap; on 120
    items no score interval can clear −2 points, so the README reads it "not shown" and says what it read before."""
    script = load_script("benchmarks/readme_results.py")
    row = {"key": "cap:capability_arithmetic", "verdict": NONINFERIOR, "value": -0.0011, "units": 120,
           "ci_low": -0.006, "ci_high": 0.0}
    assert verdict(NO_WORSE, row["ci_low"], row["ci_high"], rule="original") == NONINFERIOR
    assert script.current_reading(row) == (NO_WORSE, NOT_SHOWN)
    assert script.current_reading({**row, "method": "paired-score"}) == (NO_WORSE, NONINFERIOR)
    study = json.loads(script.FULL_STUDY.read_text(encoding="utf-8"))
    assert "(2 as first registered, before capability's reading was amended on 2026-12-07" in script.headline(study)
