"""benchmarks/level_diagnosis.py: the decision-token reading that diagnosed the failed levels of issue 41."""

from __future__ import annotations

import pytest
import torch
from script_loader import load_script

diagnosis = load_script("benchmarks/level_diagnosis.py")


def test_a_token_opening_two_kinds_is_counted_once_as_shared():
    kinds = diagnosis.disjoint({"refusal": {1, 2}, "compliance": {2, 3, 4}})
    assert kinds == {"refusal": {1}, "compliance": {3, 4}, "shared": {2}}


def test_greedy_can_open_the_kind_with_less_total_mass_when_the_other_is_split():
    # refusal: one token with 0.4; compliance: three tokens with 0.2 each (0.6 in all)
    probs = torch.tensor([0.4, 0.2, 0.2, 0.2])
    point = diagnosis.mass_at(probs, {"refusal": {0}, "compliance": {1, 2, 3}})
    assert point["greedy"] == "refusal"
    assert point["mass"]["compliance"] == pytest.approx(0.6) and point["top_single"]["compliance"] == pytest.approx(0.2)
    summary = diagnosis.summarise([point, diagnosis.mass_at(torch.tensor([0.1, 0.5, 0.2, 0.2]),
                                                            {"refusal": {0}, "compliance": {1, 2, 3}})])
    assert summary["greedy"] == {"refusal": 1, "compliance": 1}
    assert summary["larger_total_mass"] == {"compliance": 2} and summary["greedy_opens_smaller_total"] == 1


def test_a_level_name_gives_its_settings():
    assert diagnosis.style_of("w16-long").response_wordings == 16
    assert diagnosis.style_of("w4-short").response_length == "short"
    with pytest.raises(ValueError):
        diagnosis.style_of("l2")
