"""The README's off-policy profile table and its three-family observation, generated from committed profiles.

``opct pairs profile`` writes a profile's every measure, with its interval and n, as JSON (``--out``). The
profiles the README quotes are committed in ``benchmarks/results/profile/`` (one per organism family, each
measured with the command in ``measured.json`` there), and this script writes three blocks from them:

* between ``<!-- results:profile:start -->`` and ``<!-- results:profile:end -->``: the llama organism's
  profile, one row per axis with the measures the README's explanation rests on;
* between ``<!-- results:profile-families:start -->`` and ``<!-- results:profile-families:end -->`` (inline,
  in a sentence): per organism family, the jailbreak pairs' own − target sequence log-prob (from that
  family's profile) beside OPCT − BCT on adaptive defense in the committed full study
  (``benchmarks/results/demo-full/report.json``);
* in ``docs/comparison.md``, between ``<!-- results:profile-full:start -->`` and
  ``<!-- results:profile-full:end -->``: every measure of the llama profile, as ``opct pairs profile`` prints it.

::

    python benchmarks/readme_profile.py          # rewrites the blocks in README.md and docs/comparison.md
    python benchmarks/readme_profile.py --check  # exit 1 when a page does not show what the files say

``tests/test_readme_profile.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opct.diagnostics.offpolicy import MEASURES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The page whose off-policy profile section shows every measure of the llama profile.
COMPARISON = ROOT / "docs" / "comparison.md"
PROFILES = ROOT / "benchmarks" / "results" / "profile"
#: How each committed profile was measured: its command, date, commit and wall time, per family.
MEASURED = PROFILES / "measured.json"
#: The full study whose per-family OPCT − BCT on adaptive defense stands beside each family's profile.
FULL_STUDY = ROOT / "benchmarks" / "results" / "demo-full" / "report.json"
FAMILIES = ("llama", "qwen3", "gpt2")
#: The family whose profile is the README's table (the shipped organism, ``--model organism``).
TABLE_FAMILY = "llama"
AXES = ("sycophancy", "jailbreak", "awareness")
START, END = "<!-- results:profile:start -->", "<!-- results:profile:end -->"
FAMILIES_START, FAMILIES_END = "<!-- results:profile-families:start -->", "<!-- results:profile-families:end -->"
FULL_START, FULL_END = "<!-- results:profile-full:start -->", "<!-- results:profile-full:end -->"
#: The profile's measures the README quotes, in its order: (key in the profile's JSON, the column's label, a share).
COLUMNS = (
    ("greedy_equals_target", "greedy answer = BCT's target", True),
    ("target_prob_at_divergence", "target's token at the decision token: its probability", False),
    ("teacher_top1_at_divergence", "teacher's top-1 mass there", False),
    ("target_seq_logprob", "target: sequence log-prob", False),
    ("own_seq_logprob", "own T=1 samples: sequence log-prob", False),
)
#: The study metric beside the profiles: the paper's headline safety claim.
STUDY_KEY = "dsr_adaptive"


def profile_path(family: str) -> Path:
    """The committed profile of one organism family."""
    return PROFILES / f"organism-{family}.json"


def _number(x: float, share: bool) -> str:
    """``52%`` for a share, else three significant digits as ``opct pairs profile`` prints them."""
    return f"{x * 100:.0f}%" if share else f"{x:.3g}"


def cell(measure: Mapping[str, Any] | None, share: bool) -> str:
    """``value [95% interval] n=...``; ``n=0`` for a measure with no pair."""
    if not measure or measure.get("value") is None or not measure.get("n"):
        return "n=0"
    bound = (lambda x: f"{x * 100:.0f}") if share else (lambda x: _number(x, share))
    interval = ("" if measure.get("ci_low") is None or measure.get("ci_high") is None
                else f" [{bound(measure['ci_low'])}, {bound(measure['ci_high'])}]")
    return f"{_number(measure['value'], share)}{interval} n={measure['n']}"


def own_minus_target(axis: Mapping[str, Any]) -> float | None:
    """The axis's own − target sequence log-prob (nats): the mean over the student's own samples minus the
    mean over BCT's targets, as ``opct pairs profile`` prints it; ``None`` when either has no sequence."""
    own, target = axis["measures"].get("own_seq_logprob"), axis["measures"].get("target_seq_logprob")
    if not own or not target or own.get("value") is None or target.get("value") is None:
        return None
    return float(own["value"]) - float(target["value"])


def _gap(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


def _source(path: Path) -> str:
    return str(path.relative_to(ROOT))


def profile_table(profile: Mapping[str, Any], measured: Mapping[str, Any]) -> str:
    """The README block for one profile: how it was measured, then one row per axis with its pairs, each
    :data:`COLUMNS` measure and the own − target difference."""
    axes = profile["axes"]
    names = [a for a in AXES if a in axes]
    lines = [
        START,
        f"<!-- generated by benchmarks/readme_profile.py from {_source(profile_path(TABLE_FAMILY))}; do not edit by hand -->",
        f"`{measured['command']}` ({measured['date']}, at {measured['commit']}): model `{profile['model']}` (llama), "
        f"up to {profile['pairs_per_axis']} training pairs per axis (seed {profile['seed']}), answers up to "
        f"{profile['max_new_tokens']} tokens, {profile['samples_per_pair']} own sample per pair; value [95%, "
        "clusters resampled] n; own − target: the difference of the two means, nats.",
        "",
        "| axis | pairs (clusters) | " + " | ".join(label for _, label, _ in COLUMNS) + " | own − target |",
        "|---|---|" + "---|" * len(COLUMNS) + "---|",
    ]
    for name in names:
        axis = axes[name]
        cells = [cell(axis["measures"].get(key), share) for key, _, share in COLUMNS]
        lines.append(f"| {name} | {axis['pairs']} ({axis['clusters']}) | " + " | ".join(cells)
                     + f" | {_gap(own_minus_target(axis))} |")
    return "\n".join([*lines, END])


def full_table(profile: Mapping[str, Any], measured: Mapping[str, Any]) -> str:
    """docs/comparison.md's block for one profile: how it was measured, then every measure the file holds (in
    ``opct pairs profile``'s order and with its labels, a measure it does not know by its key), one column per axis,
    each cell as the command prints it."""
    axes = profile["axes"]
    names = sorted(axes)
    keys = [k for k in MEASURES if any(k in axes[a]["measures"] for a in names)]
    keys += sorted({k for a in names for k in axes[a]["measures"]} - set(keys))
    lines = [
        FULL_START,
        f"<!-- generated by benchmarks/readme_profile.py from {_source(profile_path(TABLE_FAMILY))}; do not edit by hand -->",
        f"Measured {measured['date']} at {measured['commit']} with `{measured['command']}`; each cell: value "
        "[95% interval] n.",
        "",
        "| measure | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        "| pairs (clusters) | " + " | ".join(f"{axes[a]['pairs']} ({axes[a]['clusters']})" for a in names) + " |",
        "| cut off at the token limit: targets / answers / samples | " + " | ".join(
            f"{axes[a]['truncated_targets']} / {axes[a]['truncated_answers']} / {axes[a]['truncated_samples']} of "
            f"{axes[a]['samples']}" for a in names) + " |",
    ]
    for key in keys:
        lines.append(f"| {MEASURES.get(key, key)} | "
                     + " | ".join(cell(axes[a]["measures"].get(key), share=False) for a in names) + " |")
    return "\n".join([*lines, FULL_END])


def families_sentence(profiles: Mapping[str, Mapping[str, Any]], study: Mapping[str, Any]) -> str:
    """The README's inline block that sets each family's jailbreak own − target (its profile) beside its
    OPCT − BCT on adaptive defense in the full study (a point estimate per family, no interval)."""
    row = next(r for r in study["pooled"] if r["key"] == STUDY_KEY)
    parts = [f"{family} {_gap(own_minus_target(profiles[family]['axes']['jailbreak']))} nats, "
             f"{row['per_family'][family] * 100:+.1f} pts" for family in FAMILIES]
    return (f"{FAMILIES_START}jailbreak own − target, then OPCT − BCT: {'; '.join(parts)} (profiles in "
            f"`{_source(PROFILES)}/`, OPCT − BCT from `{_source(FULL_STUDY)}`){FAMILIES_END}")


def readme_block(readme: str, start_marker: str, end_marker: str) -> str:
    """The block of ``readme`` between two markers (the markers included)."""
    start, end = readme.index(start_marker), readme.index(end_marker) + len(end_marker)
    return readme[start:end]


def blocks(profiles_dir: Path = PROFILES) -> tuple[str, str, str]:
    """The README's two blocks and docs/comparison.md's one from the committed files (profiles read from
    ``profiles_dir``)."""
    profiles = {f: json.loads((profiles_dir / profile_path(f).name).read_text(encoding="utf-8")) for f in FAMILIES}
    measured = json.loads((profiles_dir / MEASURED.name).read_text(encoding="utf-8"))
    study = json.loads(FULL_STUDY.read_text(encoding="utf-8"))
    profile, how = profiles[TABLE_FAMILY], measured[TABLE_FAMILY]
    return profile_table(profile, how), families_sentence(profiles, study), full_table(profile, how)


def main(argv: list[str] | None = None) -> int:
    """Rewrite README.md's profile blocks from the committed files (``--check``: only say whether they are current)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md's blocks differ from the files'")
    parser.add_argument("--profiles", type=Path, default=PROFILES,
                        help="a folder of organism-<family>.json profiles and measured.json (default: the committed ones)")
    args = parser.parse_args(argv)
    table, families, full = blocks(args.profiles)
    readme, comparison = README.read_text(encoding="utf-8"), COMPARISON.read_text(encoding="utf-8")
    current = readme_block(readme, START, END)
    current_families = readme_block(readme, FAMILIES_START, FAMILIES_END)
    current_full = readme_block(comparison, FULL_START, FULL_END)
    if args.check:
        if current != table or current_families != families or current_full != full:
            print("README.md's or docs/comparison.md's profile blocks are not the committed profiles': "
                  "run python benchmarks/readme_profile.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(readme.replace(current, table).replace(current_families, families), encoding="utf-8")
    COMPARISON.write_text(comparison.replace(current_full, full), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
