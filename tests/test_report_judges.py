"""The report's judges section: each judge with its measured agreement, and no headline from one below threshold."""

from __future__ import annotations

import json
from pathlib import Path

from opct.report.experiment import Experiment
from opct.report.section import ReportInputs
from opct.report.sections.judges import JUDGES_SECTION, judges_used


def _agreement(judge: str, kappa: float, accuracy: float, eligible: bool) -> dict:
    return {"judge": judge, "compared": 150, "accuracy": {"value": accuracy, "ci_low": accuracy - 0.05, "ci_high": 0.99},
            "kappa": {"value": kappa, "ci_low": kappa - 0.2, "ci_high": kappa + 0.2},
            "threshold": {"kappa": 0.6, "accuracy": 0.9}, "headline_eligible": eligible}


def test_a_judge_below_its_threshold_gives_no_headline_and_an_unmeasured_one_says_so(tmp_path: Path) -> None:
    exp = Experiment(tmp_path, results={
        "base": {"awareness": {"judges": ["rule-sage@2"]}, "jailbreak": {"judges": ["rule-refusal+rule-harm@2+1"]}},
        "opct": {"awareness": {"judges": ["rule-sage@2"]}}})
    assert judges_used(exp) == {"rule-sage": ["awareness"], "rule-refusal": ["jailbreak"], "rule-harm": ["jailbreak"]}
    folder = tmp_path / "judge-agreement"
    folder.mkdir()
    (folder / "warning.json").write_text(json.dumps(_agreement("rule-sage", 0.09, 0.61, False)))
    (folder / "refusal.json").write_text(json.dumps(_agreement("rule-refusal", 0.61, 0.96, True)))
    (folder / "notes.json").write_text("[1, 2]")  # not an agreement: skipped
    data = JUDGES_SECTION.data(ReportInputs(exp, table=None))  # type: ignore[arg-type]
    rows = {r[0]: r for r in data["rows"]}
    assert rows["rule-sage"][3:] == ["61.0% [56.0%, 99.0%]", "0.09 [-0.11, 0.29]", "no"]
    assert rows["rule-refusal"][-1] == "yes"
    assert rows["rule-harm"][2] == "not measured"
    assert data["notes"] == ["rule-sage is below its threshold (kappa >= 0.6, accuracy >= 90%): its numbers in "
                             "awareness are not headline numbers."]
    md = JUDGES_SECTION.markdown(data)
    assert "## Judges, measured against a reader" in md and "**rule-sage is below its threshold" in md
    assert "<strong>rule-sage is below its threshold" in JUDGES_SECTION.html(data)


def test_without_agreement_files_the_section_is_left_out(tmp_path: Path) -> None:
    exp = Experiment(tmp_path, results={"base": {"awareness": {"judges": ["rule-sage@2"]}}})
    assert JUDGES_SECTION.data(ReportInputs(exp, table=None)) is None  # type: ignore[arg-type]
