"""``benchmarks/compile_trials.py`` compares what it says: every variant decodes the same steps, in turns
that rotate, and each is measured against the eager reference for speed and for log-probs."""

from __future__ import annotations

import pytest
import torch
from script_loader import load_script


def _script():
    return load_script("benchmarks/compile_trials.py")


class _Fake:
    """A decoder whose log-probs are ``offset`` plus the step, and which records when it was called."""

    def __init__(self, name: str, offset: float, calls: list[tuple[int, str]], seconds: float) -> None:
        self.name, self.offset, self.calls, self.seconds = name, offset, calls, seconds

    def step(self, tokens: torch.Tensor, step: int) -> tuple[float, torch.Tensor]:
        self.calls.append((step, self.name))
        return self.seconds, torch.full((2, 3), self.offset + step)


def test_variants_take_turns_in_a_rotating_order_and_keep_their_own_outputs() -> None:
    script = _script()
    calls: list[tuple[int, str]] = []
    fakes = {"a": _Fake("a", 0.0, calls, 0.02), "b": _Fake("b", 0.5, calls, 0.01), "c": _Fake("c", 0.0, calls, 0.04)}
    times, logprobs = script.interleaved(fakes, 4, torch.zeros(2, 4))
    assert [n for s, n in calls if s == 0] == ["a", "b", "c"] and [n for s, n in calls if s == 1] == ["b", "c", "a"]
    assert [n for s, n in calls if s == 3] == ["a", "b", "c"] and times["b"] == [0.01] * 4
    assert logprobs["b"].shape == (2, 4, 3) and logprobs["b"][0, 2, 0] == 2.5


def test_each_trial_is_compared_with_the_eager_reference() -> None:
    script = _script()
    trials = [script.Trial("eager-dynamic", 10.0, 0.0), script.Trial("compiled-static", 8.0, 14.0)]
    lp = {"eager-dynamic": torch.zeros(2, 3), "compiled-static": torch.tensor([[0.0, 3e-5, -1e-5], [0, 0, 0]])}
    script.compare(trials, lp)
    assert trials[0].speedup == 1.0 and trials[0].max_abs_logprob_diff == 0.0
    assert trials[1].speedup == pytest.approx(1.25) and trials[1].max_abs_logprob_diff == pytest.approx(3e-5)
    assert "| compiled-static | 8.00 | 1.25 | 14.0 | 3.00e-05 |" in script.summary_table(trials)


def test_the_reference_always_runs_first_and_unknown_variants_are_refused() -> None:
    script = _script()
    assert script.parse_variants("compiled-static,eager-dynamic") == ["eager-dynamic", "compiled-static"]
    with pytest.raises(SystemExit, match="unknown variant"):
        script.parse_variants("eager-dynamic,jit")
