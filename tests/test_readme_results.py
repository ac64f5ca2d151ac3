"""The README's headline numbers are reproducible (issue 42): its quick-demo table is what
``benchmarks/readme_results.py`` generates from the committed reference run's ``report.json``, and the
pipeline behind them is deterministic: a reduced experiment run twice writes byte-identical results files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script("benchmarks/readme_results.py")


def test_the_readme_quick_demo_table_is_the_committed_reference_s() -> None:
    script = _script()
    reference = json.loads(script.REFERENCE.read_text(encoding="utf-8"))
    table = script.quick_demo_table(reference)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert script.readme_block(readme) == table
    assert script.main(["--check"]) == 0
    assert f"`{reference['opct_commit'][:7]}`" in table and reference["created"][:10] in table  # commit and date carried
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| metric")]
    assert len(rows) == len(reference["verdict"]) >= 5
    for row, line in zip(reference["verdict"], rows, strict=True):
        assert line.startswith(f"| {row['header']} |") and row["text"] in line
        assert script.current_reading(row)[1] in line  # the verdict as the report reads it now


def test_the_check_fails_on_a_stale_table(tmp_path: Path) -> None:
    script = _script()
    reference = json.loads(script.REFERENCE.read_text(encoding="utf-8"))
    reference["verdict"][0]["text"] = "+99.9 pts [+99.0, +99.9] (k=1)"
    changed = tmp_path / "report.json"
    changed.write_text(json.dumps(reference), encoding="utf-8")
    assert script.main(["--check", "--reference", str(changed)]) == 1


def test_the_readme_finding_is_the_full_studys_and_keeps_incomplete_with_its_number() -> None:
    """The one-sentence finding on the README's first screen is generated from the committed full study's
    report.json: its pooled OPCT − BCT on the headline metric, interval, units and verdict, and how many of
    the claimed metrics hold; a row marked INCOMPLETE carries the mark beside its number."""
    script = _script()
    study = json.loads(script.FULL_STUDY.read_text(encoding="utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = script.readme_block(readme, script.HEADLINE_START, script.HEADLINE_END)
    assert block == script.headline(study)
    assert readme.index(block) < readme.index("## Quick start")  # on the first screen, before the commands
    row = next(r for r in study["pooled"] if r["key"] == script.HEADLINE_KEY)
    value, interval = row["text"]["difference"]
    assert f"**{value} {interval}**" in block and f"k={row['units']}" in block
    readings = [script.current_reading(r) for r in study["pooled"]]  # capability read as non-inferiority
    claimed = [reading for side, reading in readings if side]
    holds = sum(reading in (script.HOLDS, script.NONINFERIOR) for reading in claimed)
    assert f"claim holds on {holds} of the {len(claimed)} metrics" in block and "INCOMPLETE" not in block
    row["incomplete"] = ["llama/opct-s0"]
    assert f"**{value} {interval}** INCOMPLETE (1 run(s))" in script.headline(study)


#: The files a run's numbers come from: every eval's results and records, the attack's, the trained weights.
RESULT_FILES = ("results.json", "samples.jsonl", "attempts.jsonl", "adapter_model.safetensors")


def _reduced_run(out: Path) -> None:
    from opct.experiments.runner import load_experiment, run_experiment

    cfg = load_experiment(None, [
        f"output_dir={out}", "name=e", "axes=[sycophancy]", "methods=[base, opct]", "eval.limit=4",
        "eval.capability=false", "eval.splits=[heldout]", "eval.generation.max_new_tokens=8", "eval.allow_unscored=true",
        "attack.enabled=true", "attack.budget=1", "attack.static_baseline=false", "attack.generation.max_new_tokens=8",
        "train.train.max_steps=1", "train.train.pairs_per_step=2", "train.train.checkpoint_every=1",
        "train.opct.sampling.n=2", "train.opct.sampling.max_new_tokens=8"])
    run_experiment(cfg, show_progress=False, log=lambda line: None)


def test_a_reduced_pipeline_run_twice_writes_byte_identical_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import opct.report

    monkeypatch.setattr(opct.report, "write_report", lambda root: None)  # the report is read from these files
    _reduced_run(tmp_path / "runs")
    shutil.move(tmp_path / "runs", tmp_path / "first")
    _reduced_run(tmp_path / "runs")  # the same path: a results file records its model's path
    first = {p.relative_to(tmp_path / "first"): p for p in (tmp_path / "first").rglob("*") if p.name in RESULT_FILES}
    second = {p.relative_to(tmp_path / "runs"): p for p in (tmp_path / "runs").rglob("*") if p.name in RESULT_FILES}
    assert sorted(first) == sorted(second)
    assert {p.name for p in first} == set(RESULT_FILES) and len(first) >= 7  # evals, attacks and weights of both models
    assert [str(k) for k in first if first[k].read_bytes() != second[k].read_bytes()] == []
