"""``benchmarks/gradient_checkpointing.py`` reports what it says: per variant the medians over its runs, and the
ratios checkpointed / plain of the step's own memory, the peak and the step time."""

from __future__ import annotations

import pytest
from script_loader import load_script


def _run(variant: str, peak: float, before: float, step: float) -> dict:
    return {"variant": variant, "peak_rss_mib": peak, "rss_before_step_mib": before,
            "step_rss_rise_mib": peak - before, "step_s": step}


def test_medians_per_variant_and_ratios_checkpointed_over_plain() -> None:
    script = load_script("benchmarks/gradient_checkpointing.py")
    runs = [_run("plain", 2000, 400, 10.0), _run("checkpointed", 900, 400, 13.0),
            _run("plain", 2200, 400, 12.0), _run("checkpointed", 1100, 400, 14.0),
            _run("plain", 2100, 400, 30.0), _run("checkpointed", 1000, 400, 15.0)]
    summary = script.summarise(runs)
    assert summary["medians"]["plain"] == {"peak_rss_mib": 2100, "rss_before_step_mib": 400,
                                           "step_rss_rise_mib": 1700, "step_s": 12.0}
    assert summary["medians"]["checkpointed"]["step_rss_rise_mib"] == 600
    ratios = summary["ratios_checkpointed_over_plain"]
    assert ratios["step_rss_rise"] == pytest.approx(600 / 1700)
    assert ratios["peak_rss"] == pytest.approx(1000 / 2100)
    assert ratios["step_time"] == pytest.approx(14.0 / 12.0)
