"""A toy training method (tests/test_toy_method.py registers it) is pooled in a study against the paper's pair
with no side taken."""

from __future__ import annotations

import test_lab_study as test_study
from test_toy_method import toy_methods  # noqa: F401  (the fixture that registers the toy methods)

from opct_lab.report.study import REPORT_MD, write_study_report


def test_a_toy_method_is_pooled_against_the_papers_pair_with_no_side_taken(toy_methods, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setitem(test_study.LEVELS, "toy", (0.5, 0.4, 0.9))
    root = test_study.fabricate_study(tmp_path / "study", families=("llama", "qwen3"), seeds=(0, 1),
                                      trained=("bct", "opct", "toy"))
    data = write_study_report(root)
    assert data["comparison"] == ["opct", "bct"]
    assert [o["pair"] for o in data["others"]] == [["toy", "bct"], ["toy", "opct"]]
    vs_bct = {r["key"]: r for r in data["others"][0]["pooled"]}
    assert vs_bct["sycophancy"]["paper_side"] is None and vs_bct["dsr_adaptive"]["verdict"] == "Toy lower"
    md = (root / REPORT_MD).read_text()
    assert "OPCT vs BCT vs Toy" in md and "## Toy − BCT, pooled over families and seeds" in md
