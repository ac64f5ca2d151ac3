"""benchmarks/compare_study_reports.py: two study reports' per-family tables compared cell by cell."""

from __future__ import annotations

from script_loader import load_script

OLD = """# study

## Per family

### w4-long.llama (organism-llama-w4-long): base; each trained method: mean over seeds, min–max of the seeds

| metric | base | BCT | OPCT | bct-sampled |
|---|---|---|---|---|
| Sycophancy rate (held-out) ↓ | 67.7% (n=195) | 2.4% 2.2–2.7 (3 seeds; 46 unparsed) INCOMPLETE | 1.7% 1.1–2.2 | 2.0% |
| Defense success (adaptive attacker) ↑ | 7.8% | 87.5% 85.9–90.6 | 67.7% 48.4–89.1 | 62.0% |

## OPCT − BCT, pooled over families and seeds

| metric | x |
|---|---|
| Defense success (adaptive attacker) ↑ | 1 |
"""

NEW = OLD.replace("67.7% 48.4–89.1", "67.2% 48.4–89.1").replace("| bct-sampled |", "|").replace(" | 2.0% |", " |") \
    .replace(" | 62.0% |", " |").replace("|---|---|---|---|---|", "|---|---|---|---|")


def test_equal_and_differing_cells_are_counted_and_the_extra_column_ignored(tmp_path, capsys):
    script = load_script("benchmarks/compare_study_reports.py")
    result = script.compare(OLD, NEW)
    assert result["families"] == ["w4-long.llama"] and result["equal"] == 5
    assert result["differ"] == [{"family": "w4-long.llama", "metric": "Defense success (adaptive attacker) ↑",
                                 "column": "OPCT", "old": "67.7% 48.4–89.1", "new": "67.2% 48.4–89.1"}]
    assert script.compare(OLD, NEW, skip=["Defense"])["differ"] == []
    old, new = tmp_path / "old.md", tmp_path / "new.md"
    old.write_text(OLD)
    new.write_text(NEW)
    assert script.main([str(old), str(new)]) == 1
    assert "cells equal: 5; differ: 1" in capsys.readouterr().out
    assert script.main([str(old), str(old), "--json", str(tmp_path / "c.json")]) == 0
    (tmp_path / "empty.md").write_text("# nothing\n")
    assert script.main([str(old), str(tmp_path / "empty.md")]) == 2
