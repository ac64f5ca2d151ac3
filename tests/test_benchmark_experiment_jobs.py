"""``benchmarks/experiment_jobs.py`` measures what it says: its reduced demo is a valid plan of the quick demo
with only the size changed, and each measurement runs ``opct run`` with the ``--jobs`` value it reports."""

from __future__ import annotations

from pathlib import Path

from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script("benchmarks/experiment_jobs.py")


def test_the_reduced_demo_changes_only_its_size(tmp_path: Path) -> None:
    from opct.experiments.runner import load_experiment, resolve

    script = _script()
    full = resolve(load_experiment(str(script.DEMO)))
    reduced = resolve(load_experiment(str(script.DEMO), [f"output_dir={tmp_path}",
                                                         *script.reduced_overrides(7, 5, 3)]))
    assert [r.key for r in reduced.runs] == [r.key for r in full.runs] and reduced.evals == full.evals
    for small, big in zip(reduced.runs, full.runs, strict=True):
        assert small.config.train.max_steps == 7 and small.config.validation.every is None
        assert (small.config.method, small.config.optim) == (big.config.method, big.config.optim)
    assert reduced.experiment.eval.limit == 5 and reduced.experiment.attack.budget == 3


def test_each_measurement_runs_the_jobs_it_reports(tmp_path: Path) -> None:
    cmd = _script().command(tmp_path, 3, ["eval.limit=2"])
    assert cmd[cmd.index("--jobs") + 1] == "3"
    assert f"output_dir={tmp_path}" in cmd and "eval.limit=2" in cmd and cmd[2:4] == ["opct.cli", "run"]
