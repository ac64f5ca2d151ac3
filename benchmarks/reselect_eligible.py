r"""Apply amendment (a)'s teacher-KL half to a committed ``selection.json`` offline, and print each rule's picks
before and after it (docs/mechanism.md, amendment (a); no model runs, nothing is retrained).

Usage::

    python benchmarks/reselect_eligible.py SELECTION_JSON [--json]

Offline, only the teacher-KL half applies: a (candidate, step) whose validation teacher-KL exceeds the base
model's (``base_validation.val_teacher_kl`` of the same file) is not eligible. The collapse half needs each
candidate's training records (``metrics.jsonl``), which a ``selection.json`` does not hold, so it is **not
applied** here. The family_transfer rule is re-picked only among the steps the file already has a family score
for; a real re-selection (``opct-lab select`` with ``eligibility: amendment-a``) may attack other checkpoints
and pick differently. It writes nothing.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from pathlib import Path
from typing import Any

from opct.experiments.recipes import PICK_RULES
from opct_lab.selection.eligibility import PROTOCOL, apply_amendment_a
from opct_lab.selection.run import pick

SCOPE = ("offline, teacher-KL half of amendment (a) only: the collapse half needs the candidates' metrics.jsonl, "
         "which the selection JSON does not hold; family_transfer re-picked among already-attacked steps only")


def _numbers(value: Any) -> Any:
    """A selection.json value with every null (an unmeasured number) read back as NaN, as the rules read it."""
    if value is None:
        return math.nan
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value


def load_candidates(selection: dict[str, Any]) -> list[dict[str, Any]]:
    """The file's candidates as :func:`~opct_lab.selection.run.pick` reads them: integer steps, NaN for null."""
    return [{**c, "steps": {int(step): _numbers(m) for step, m in c["steps"].items()}}
            for c in copy.deepcopy(selection["candidates"])]


def _brief(choice: dict[str, Any] | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    choice = _numbers(choice)
    return {"candidate": choice["candidate"], "step": choice["step"], "val_teacher_kl": choice["val_teacher_kl"],
            "family_score": None if math.isnan(choice["family_score"]) else choice["family_score"]}


def reselect(selection: dict[str, Any]) -> dict[str, Any]:
    """``{"scope", "base_val_teacher_kl", "points", "not_eligible_before" (the capability guard),
    "teacher_kl_above_base" (every point the teacher-KL half refuses), "removed" (those the guard had kept),
    "protocol_reproduces_file", "picks"}``: ``picks[method]
    [rule]`` holds the file's pick, the protocol's pick recomputed here (it must equal the file's), and the
    amended pick (None: no eligible step)."""
    if selection.get("eligibility", PROTOCOL) != PROTOCOL:
        raise SystemExit(f"this selection already applied {selection['eligibility']}")
    base = selection["base_validation"]["val_teacher_kl"]
    candidates = load_candidates(selection)
    methods = sorted({c["method"] for c in candidates})
    before = {m: {rule: pick(candidates, m, rule) for rule in PICK_RULES} for m in methods}
    not_eligible_before = sum(not s["eligible"] for c in candidates for s in c["steps"].values())
    removed = apply_amendment_a(candidates, base, collapse_at=None)
    above_base = sum(not s["eligibility"]["amendment_a"] for c in candidates for s in c["steps"].values())
    after = {m: {rule: pick(candidates, m, rule) for rule in PICK_RULES} for m in methods}
    picks = {m: {rule: {"file": _brief(selection["chosen"].get(m, {}).get(rule)), "protocol": _brief(before[m][rule]),
                        "amendment_a_teacher_kl_half": _brief(after[m][rule])} for rule in PICK_RULES} for m in methods}
    return {"scope": SCOPE, "base_val_teacher_kl": base,
            "points": sum(len(c["steps"]) for c in candidates), "not_eligible_before": not_eligible_before,
            "teacher_kl_above_base": above_base, "removed": removed,
            "protocol_reproduces_file": all(p["file"] == p["protocol"] for r in picks.values() for p in r.values()),
            "picks": picks}


def _line(choice: dict[str, Any] | None) -> str:
    if choice is None:
        return "none eligible"
    score = "" if choice["family_score"] is None else f", family score {choice['family_score']:.3f}"
    return f"{choice['candidate']} step {choice['step']} (val teacher-KL {choice['val_teacher_kl']:.3f}{score})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("selection", type=Path)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = reselect(json.loads(args.selection.read_text(encoding="utf-8")))
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{args.selection.name}: {result['scope']}")
    print(f"base validation teacher-KL {result['base_val_teacher_kl']:.3f}; {result['points']} (candidate, step) points, "
          f"{result['not_eligible_before']} not eligible by the capability guard; {result['teacher_kl_above_base']} above "
          f"the base's teacher-KL, {result['removed']} of them eligible before; the protocol recomputed here "
          f"{'reproduces' if result['protocol_reproduces_file'] else 'DOES NOT reproduce'} the file's picks")
    for method, by_rule in result["picks"].items():
        for rule, p in by_rule.items():
            same = " (unchanged)" if p["protocol"] == p["amendment_a_teacher_kl_half"] else ""
            print(f"{method}, {rule}: protocol {_line(p['protocol'])} -> amended {_line(p['amendment_a_teacher_kl_half'])}{same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
