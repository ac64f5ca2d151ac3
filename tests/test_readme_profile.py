"""The README's off-policy profile numbers come from committed files (issue 59, item 1): its profile table and
its three-family observation are what ``benchmarks/readme_profile.py`` generates from the profiles in
``benchmarks/results/profile/`` and the committed full study, and the check fails when they disagree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script("benchmarks/readme_profile.py")


def test_the_readme_profile_blocks_are_the_committed_files() -> None:
    script = _script()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    comparison = (ROOT / "docs" / "comparison.md").read_text(encoding="utf-8")
    table, families, full = script.blocks()
    assert script.readme_block(readme, script.START, script.END) == table
    assert script.readme_block(readme, script.FAMILIES_START, script.FAMILIES_END) == families
    assert script.readme_block(comparison, script.FULL_START, script.FULL_END) == full
    assert script.main(["--check"]) == 0


def test_the_table_carries_each_quoted_measure_with_its_interval_and_n() -> None:
    """Every row the README's explanation quotes is there per axis, as value [interval] n from the file, and the
    settings it was measured with (pairs per axis, token limit, samples per pair) are stated beside it."""
    script = _script()
    profile = json.loads(script.profile_path(script.TABLE_FAMILY).read_text(encoding="utf-8"))
    measured = json.loads(script.MEASURED.read_text(encoding="utf-8"))[script.TABLE_FAMILY]
    table = script.profile_table(profile, measured)
    assert f"up to {profile['pairs_per_axis']} training pairs per axis" in table
    assert f"answers up to {profile['max_new_tokens']} tokens" in table and measured["command"] in table
    greedy = profile["axes"]["sycophancy"]["measures"]["greedy_equals_target"]
    assert f"{greedy['value'] * 100:.0f}% [{greedy['ci_low'] * 100:.0f}, {greedy['ci_high'] * 100:.0f}] n={greedy['n']}" in table
    awareness = profile["axes"]["awareness"]
    gap = awareness["measures"]["own_seq_logprob"]["value"] - awareness["measures"]["target_seq_logprob"]["value"]
    assert f"{gap:+.2f}" in table
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| axis")]
    assert [row.split(" | ")[0] for row in rows] == [f"| {axis}" for axis in script.AXES]
    assert all(row.count(" | ") == 2 + len(script.COLUMNS) for row in rows)  # axis, pairs, each measure, own − target


def test_the_families_block_pairs_each_profile_with_the_studys_own_family() -> None:
    script = _script()
    study = json.loads(script.FULL_STUDY.read_text(encoding="utf-8"))
    row = next(r for r in study["pooled"] if r["key"] == script.STUDY_KEY)
    _, families, _ = script.blocks()
    for family in script.FAMILIES:
        profile = json.loads(script.profile_path(family).read_text(encoding="utf-8"))
        gap = script.own_minus_target(profile["axes"]["jailbreak"])
        assert f"{family} {gap:+.2f} nats, {row['per_family'][family] * 100:+.1f} pts" in families
    assert "\n" not in families  # inline, in the README's sentence


def test_the_check_fails_when_a_profile_changes(tmp_path: Path) -> None:
    script = _script()
    copy = tmp_path / "profiles"
    shutil.copytree(script.PROFILES, copy)
    path = copy / script.profile_path(script.TABLE_FAMILY).name
    profile = json.loads(path.read_text(encoding="utf-8"))
    profile["axes"]["jailbreak"]["measures"]["greedy_equals_target"]["value"] = 0.99
    path.write_text(json.dumps(profile), encoding="utf-8")
    assert script.main(["--check", "--profiles", str(copy)]) == 1


def test_the_full_table_shows_every_measure_the_profile_holds() -> None:
    """docs/comparison.md's table has a row for each measure in the file, including one ``opct pairs profile`` does
    not list (by its key), and none for a measure the file lacks."""
    script = _script()
    profile = json.loads(script.profile_path(script.TABLE_FAMILY).read_text(encoding="utf-8"))
    measured = json.loads(script.MEASURED.read_text(encoding="utf-8"))[script.TABLE_FAMILY]
    for axis in profile["axes"].values():
        axis["measures"]["a_new_measure"] = {"value": 0.5, "ci_low": 0.25, "ci_high": 0.75, "n": 4}
        del axis["measures"]["teacher_entropy"]
    full = script.full_table(profile, measured)
    assert "| a_new_measure | 0.5 [0.25, 0.75] n=4 |" in full
    assert script.MEASURES["teacher_entropy"] not in full and script.MEASURES["greedy_equals_target"] in full


def test_a_measure_without_pairs_reads_n_0() -> None:
    script = _script()
    assert script.cell({"value": None, "n": 0}, share=False) == "n=0"
    assert script.cell({"value": 0.5, "ci_low": 0.25, "ci_high": 0.75, "n": 4}, share=True) == "50% [25, 75] n=4"
    assert script.own_minus_target({"measures": {"own_seq_logprob": {"value": -1.0}}}) is None
