"""benchmarks/picks_before_after.py: two selections of one family, each rule's pick side by side."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import picks_before_after as script

STUDIES = Path(__file__).resolve().parents[1] / "lab" / "opct_lab" / "studies"


def _choice(candidate: str, step: int, kl: float, score: float | None, defended: float | None) -> dict:
    attack = {"defended_rate": defended} if defended is not None else None
    return {"candidate": candidate, "step": step, "recipe": {"optim.lr": 0.003, "opct.loss": {"kind": "topk"}},
            "val_teacher_kl": kl, "family_score": score, "family_attack": attack}


def _selection(base_kl: float, chosen: dict, eligibility: str | None = None) -> dict:
    out = {"base_validation": {"val_teacher_kl": base_kl}, "chosen": chosen}
    if eligibility:
        out["eligibility"] = eligibility
    return out


def test_each_rules_pick_is_shown_on_both_sides_and_a_changed_pick_is_marked(tmp_path, capsys):
    first = _selection(0.182, {"opct": {"teacher_kl": _choice("opct-03", 180, 0.031, 0.927, 0.562),
                                        "family_transfer": _choice("opct-07", 180, 3.491, 0.99, 0.938)}})
    second = _selection(0.182, {"opct": {"teacher_kl": _choice("opct-03", 180, 0.031, 0.927, 0.562),
                                         "family_transfer": _choice("opct-04", 80, 0.032, 0.938, None)},
                                "bct": {"family_transfer": None}}, eligibility="amendment-a")
    rows = {(r["method"], r["rule"]): r for r in script.compare(first, second)}
    assert not rows["opct", "teacher_kl"]["changed"]
    moved = rows["opct", "family_transfer"]
    assert moved["changed"]
    assert moved["first"] == ["opct-07 @ 180 (optim.lr=0.003, opct.loss=topk)", "3.491", "0.990", "0.938"]
    assert moved["second"] == ["opct-04 @ 80 (optim.lr=0.003, opct.loss=topk)", "0.032", "0.938", "—"]
    assert rows["bct", "family_transfer"]["first"][0] == rows["bct", "family_transfer"]["second"][0] == "none eligible"
    for name, data in (("a.json", first), ("b.json", second)):
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")
    code = script.main([str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--labels", "first", "amended",
                        "--md", str(tmp_path / "t.md"), "--json", str(tmp_path / "t.json")])
    assert code == 0
    md = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert capsys.readouterr().out == md
    assert "amended: eligibility `amendment-a`; base model's validation teacher-KL 0.182." in md
    assert "first: eligibility `protocol`" in md
    assert "| opct | family_transfer | opct-07 @ 180" in md and md.rstrip().endswith("| yes |")
    assert json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))["labels"] == ["first", "amended"]


def test_a_committed_selection_against_itself_changes_no_pick():
    selection = json.loads((STUDIES / "organism_mechanism_selection_w16-long.llama.json").read_text(encoding="utf-8"))
    rows = script.compare(selection, selection)
    assert rows and not any(r["changed"] for r in rows)
    family = next(r for r in rows if (r["method"], r["rule"]) == ("opct", "family_transfer"))
    assert family["first"][:2] == ["opct-07 @ 180 (optim.lr=0.003, opct.loss=topk)", "3.491"]


def test_a_missing_file_is_refused_with_its_name(tmp_path, capsys):
    assert script.main([str(tmp_path / "nope.json"), str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err


def test_the_committed_picks_table_regenerates_and_is_the_one_in_the_docs(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "picks.md"
    assert script.main([str(STUDIES / "organism_mechanism_selection_w16-long.llama.json"),
                        str(STUDIES / "organism_mechanism_selection_w16-long.llama.amendment-a.json"),
                        "--labels", "first selection", "amendment (a)", "--md", str(out)]) == 0
    committed = (repo / "benchmarks" / "results" / "mechanism" / "amendment-a" / "picks.md").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed
    table = committed.strip().split("\n\n")[-1]
    assert table in (repo / "docs" / "mechanism.md").read_text(encoding="utf-8")
