"""The ablation report: each variant minus the reference, pooled over seeds, with its compute (fabricated runs)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from report_fixtures import metric as _metric
from report_fixtures import write as _write
from rich.console import Console

from opct.report import load_experiment, write_report
from opct.report.ablation import ablation_rows, ablation_table, largest_moves
from opct.report.terminal import results_renderables

SEEDS = [0, 1, 2]
#: (sycophancy rate, attack defense rate) per variant: opct-good is better on both, opct-same is the reference.
LEVELS = {"opct": (0.4, 0.5), "opct-good": (0.1, 0.9), "opct-same": (0.4, 0.5)}
VARIANTS = {"opct-good": {"method": "opct", "settings": {"opct.sampling.n": 6}},
            "opct-same": {"method": "opct", "settings": {"opct.sampling.temperature": 0.7}}}


def fabricate_ablation(root: Path, steps: int = 10) -> Path:
    rng = random.Random(0)
    keys = [f"{v}-s{s}" for v in LEVELS for s in SEEDS]
    _write(root / "plan.json", {"name": "abl", "model": "organism", "methods": ["base", *keys], "seeds": SEEDS,
                                "reference": "opct", "variants": VARIANTS})
    for key in ["base", *keys]:
        syco, defense = LEVELS.get(key.rsplit("-s", 1)[0], (0.6, 0.2))
        recs = [{"item_id": f"q{q}", "variant": f"b{v}", "parsed": "B", "outcome": "scored",
                 "scores": {"suggested": float(rng.random() < syco)}} for q in range(40) for v in range(3)]
        _write(root / "eval" / key / "sycophancy" / "samples.jsonl", recs)
        _write(root / "eval" / key / "sycophancy" / "results.json", {"metrics": {"sycophancy_rate": _metric(
            sum(r["scores"]["suggested"] for r in recs) / len(recs), len(recs))}})
        behaviors = [{"behavior_id": f"b{i}", "cracked": rng.random() > defense} for i in range(40)]
        _write(root / "attack" / key / "results.json", {"n": 40, "behaviors": behaviors, "metrics": {"dsr": _metric(
            sum(not b["cracked"] for b in behaviors) / 40, 40)}, "outcomes": {"behaviors": {"unscored": 0}}})
        if key == "base":
            continue
        n = 6 if key.startswith("opct-good") else 3
        _write(root / "train" / key / "manifest.json", {"method": "opct"})
        _write(root / "train" / key / "metrics.jsonl", [
            {"step": s, "completion_tokens": 10 * n, "step_time_s": 0.5, "loss": 1.0 / s, "val_teacher_kl": 0.1}
            for s in range(1, steps + 1)])
    return root


@pytest.fixture(scope="module")
def ablation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fabricate_ablation(tmp_path_factory.mktemp("abl") / "abl")


def test_each_variant_minus_the_reference_pooled_over_its_seeds(ablation: Path) -> None:
    rows = ablation_rows(load_experiment(ablation), n_resamples=500)
    assert [r.variant for r in rows] == ["opct-good", "opct-same", "opct"]  # the reference last, with no differences
    good, same, ref = rows
    assert ref.differences == [] and ref.changed == "reference" and good.changed == "opct.sampling.n=6"
    diff = {d.column.key: d for d in good.differences}
    syc, dsr = diff["sycophancy"].difference, diff["dsr_adaptive"].difference
    assert syc.estimate.ci_high < 0 < dsr.estimate.ci_low and syc.cells == 3 and dsr.cells == 3
    assert syc.estimate.value == pytest.approx(-0.3, abs=0.08) and dsr.estimate.value == pytest.approx(0.4, abs=0.15)
    same_syc = {d.column.key: d for d in same.differences}["sycophancy"].difference.estimate
    assert same_syc.ci_low < 0 < same_syc.ci_high
    # compute: the mean over seeds of what each run logged (10 steps; n 6 samples twice the tokens)
    assert good.compute == {"tokens_generated": 600, "tokens_teacher_scored": 600, "tokens_backpropagated": 600,
                            "train_seconds": 5.0}
    assert ref.compute["tokens_generated"] == 300 and good.seeds == ref.seeds == 3
    headers, cells = ablation_table(rows)
    assert headers[:2] == ["variant", "changes"] and headers[-1] == "seeds"
    good_cells = dict(zip(headers, cells[0], strict=True))
    assert good_cells["Δ Sycophancy rate (held-out) ↓"].endswith("▲")
    assert good_cells["Δ Defense success (adaptive attacker) ↑"].endswith("▲")
    assert not dict(zip(headers, cells[1], strict=True))["Δ Sycophancy rate (held-out) ↓"].endswith(("▲", "▼"))
    assert [line.split(":")[0] for line in largest_moves(rows)] == ["Sycophancy rate (held-out) ↓", "Defense success (adaptive attacker) ↑"]
    assert all("opct-good" in line for line in largest_moves(rows))


def test_the_report_has_the_ablation_instead_of_every_pair(ablation: Path) -> None:
    write_report(ablation)
    md = (ablation / "report.md").read_text(encoding="utf-8")
    html = (ablation / "report.html").read_text(encoding="utf-8")
    assert "## Ablation: each variant minus the reference" in md and "opct.sampling.n=6" in md
    assert "## Paired differences between methods" not in md  # 45 per-seed pairs would bury it
    assert 'id="ablation"' in html and "Largest resolved move" in html
    assert (ablation / "figures" / "training.png").exists()


def test_the_terminal_shows_one_column_per_variant_within_80_columns(ablation: Path) -> None:
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    for renderable in results_renderables(ablation, 80):
        console.print(renderable)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Ablation: variant − opct" in text and "opct-good" in text and "opct-same" in text
    assert "opct-s1" not in text  # per-run numbers are in report.md


def test_the_training_curves_colour_a_variant_once_whatever_its_seeds(ablation: Path) -> None:
    from opct.report.figures import plot_training

    fig = plot_training(load_experiment(ablation))
    assert fig is not None
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["OPCT", "opct-good", "opct-same"]
    colours = {line.get_label(): line.get_color() for line in fig.axes[0].get_lines() if not line.get_label().startswith("_")}
    assert len(set(map(str, colours.values()))) == 3
