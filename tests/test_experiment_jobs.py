"""``opct run --jobs N`` (issue 40): an experiment's stages in worker processes, with the results of
``--jobs 1 --threads 1``; the scheduler's order, failures and interrupts on stand-in commands."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from importlib.resources import files
from pathlib import Path

import pytest
from conftest import one_thread

from opct.experiments.parallel import StageFailedError, run_stages
from opct.experiments.stages import Stage, stage_graph

#: The quick demo's experiment file.
DEMO = Path(str(files("opct") / "experiments" / "organism_demo.yaml"))

#: The files a run's numbers come from: every eval's results and records, the attack's, the trained weights.
RESULT_FILES = ("results.json", "samples.jsonl", "attempts.jsonl", "adapter_model.safetensors")


def _reduced(out: Path):
    from opct.experiments.runner import load_experiment

    return load_experiment(None, [
        f"output_dir={out}", "name=e", "axes=[sycophancy]", "methods=[base, opct]", "eval.limit=4",
        "eval.capability=false", "eval.splits=[heldout]", "eval.generation.max_new_tokens=8", "eval.allow_unscored=true",
        "attack.enabled=true", "attack.budget=1", "attack.static_baseline=false", "attack.generation.max_new_tokens=8",
        "train.train.max_steps=1", "train.train.pairs_per_step=2", "train.train.checkpoint_every=1",
        "train.opct.sampling.n=2", "train.opct.sampling.max_new_tokens=8"])


def test_jobs_auto_writes_the_results_of_jobs_1_at_one_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--jobs auto`` (``opct demo``'s default) on a 2-core machine: 2 workers of one thread each, and the
    same bytes as ``--jobs 1 --threads 1``."""
    import opct.cli.experiment
    import opct.report
    from opct.experiments.runner import run_experiment, run_stage

    monkeypatch.setattr(opct.report, "write_report", lambda root: None)  # the report is read from these files
    monkeypatch.setattr(opct.cli.experiment, "available_cores", lambda: 2)
    jobs = opct.cli.experiment.jobs_count("auto")
    assert jobs == 2
    with one_thread():
        run_experiment(_reduced(tmp_path / "runs"), show_progress=False, log=lambda line: None)
    shutil.move(tmp_path / "runs", tmp_path / "first")
    lines: list[str] = []
    run_experiment(_reduced(tmp_path / "runs"), show_progress=False, log=lines.append, jobs=jobs)  # the same path
    first = {p.relative_to(tmp_path / "first"): p for p in (tmp_path / "first").rglob("*") if p.name in RESULT_FILES}
    second = {p.relative_to(tmp_path / "runs"): p for p in (tmp_path / "runs").rglob("*") if p.name in RESULT_FILES}
    assert sorted(first) == sorted(second)
    assert {p.name for p in first} == set(RESULT_FILES) and len(first) >= 7  # evals and attacks of both models, the adapter
    assert [str(k) for k in first if first[k].read_bytes() != second[k].read_bytes()] == []
    assert sum("started" in line for line in lines) == 5 and sum(" done " in line for line in lines) == 5
    assert "[stage] train opct" in (tmp_path / "runs" / "e" / "stages" / "train-opct.log").read_text()  # its log, kept
    # what a worker does for a finished stage: skip it, as --jobs 1 does
    skipped: list[str] = []
    run_stage(_reduced(tmp_path / "runs"), "train:opct", log=skipped.append)
    assert skipped == ["[stage] train opct: complete, skipped"]
    # a rerun of --jobs 2 keeps the finished run without a worker, and the run's first log is not overwritten
    again: list[str] = []
    run_experiment(_reduced(tmp_path / "runs"), show_progress=False, log=again.append, jobs=2)
    assert "[stage] 1 of 5 stages kept: finished in an earlier run (train:opct)" in again
    assert sum("started" in line for line in again) == 4 and not any("train:opct done" in line for line in again)
    log = (tmp_path / "runs" / "e" / "stages" / "train-opct.log").read_text()
    assert log.count("--- attempt started") == 1 and "[stage] train opct" in log
    assert (tmp_path / "runs" / "e" / "stages" / "eval-opct.log").read_text().count("--- attempt started") == 2


def test_the_stage_graph_waits_for_training_only_where_a_model_is_trained() -> None:
    stages = stage_graph(["base", "bct", "opct"], ["bct", "opct"], attack=True)
    assert [s.name for s in stages] == ["eval:base", "train:bct", "train:opct", "eval:bct", "eval:opct",
                                        "attack:base", "attack:bct", "attack:opct"]  # the order --jobs 1 runs them
    after = {s.name: s.after for s in stages}
    assert after["eval:base"] == after["attack:base"] == after["train:bct"] == ()
    assert after["eval:opct"] == after["attack:opct"] == ("train:opct",)
    assert [s.name for s in stage_graph(["base", "opct"], ["opct"], attack=False)] == ["eval:base", "train:opct", "eval:opct"]


def _script(tmp_path: Path, body: str) -> Path:
    """A stand-in worker: ``python script NAME`` records its start and end times (and pid) under ``tmp_path``."""
    path = tmp_path / "worker.py"
    path.write_text(
        "import json, os, sys, time\n"
        f"folder = {str(tmp_path)!r}\n"
        "name = sys.argv[1]\n"
        "open(os.path.join(folder, name + '.pid'), 'w').write(str(os.getpid()))\n"
        "start = time.time()\n" + body +
        "open(os.path.join(folder, name + '.times'), 'w').write(json.dumps([start, time.time()]))\n")
    return path


def _run(tmp_path: Path, stages: list[Stage], jobs: int, script: Path, lines: list[str] | None = None) -> None:
    run_stages(stages, jobs, lambda s: [sys.executable, str(script), s.name.replace(":", "-")],
               lambda s: tmp_path / "logs" / f"{s.name.replace(':', '-')}.log",
               log=(lines if lines is not None else []).append, poll_s=0.02, grace_s=5)


def test_stages_run_n_at_a_time_each_after_what_it_waits_for(tmp_path: Path) -> None:
    stages = stage_graph(["base", "bct", "opct"], ["bct", "opct"], attack=True)
    script = _script(tmp_path, "time.sleep(0.3 if name.startswith('train') else 0.1)\n")
    _run(tmp_path, stages, 2, script)
    times = {s.name: json.loads((tmp_path / f"{s.name.replace(':', '-')}.times").read_text()) for s in stages}
    for s in stages:
        assert all(times[d][1] <= times[s.name][0] for d in s.after), s.name
    events = sorted([(t[0], 1) for t in times.values()] + [(t[1], -1) for t in times.values()], key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 2  # side by side, never more than --jobs
    assert min(times, key=lambda n: times[n][0]).startswith("train")  # the trainings first


def test_a_rerun_keeps_finished_stages_without_a_process_and_appends_to_the_logs(tmp_path: Path) -> None:
    stages = stage_graph(["base", "bct"], ["bct"], attack=False)
    script = _script(tmp_path, "print('worked on', name)\n")
    _run(tmp_path, stages, 2, script)
    (tmp_path / "train-bct.pid").unlink()
    lines: list[str] = []
    kept = run_stages(stages, 2, lambda s: [sys.executable, str(script), s.name.replace(":", "-")],
                      lambda s: tmp_path / "logs" / f"{s.name.replace(':', '-')}.log", log=lines.append, poll_s=0.02,
                      finished=lambda s: s.name == "train:bct")
    assert kept == ["train:bct"] and not (tmp_path / "train-bct.pid").exists()  # no process started for it
    assert lines[0] == "[stage] 1 of 3 stages kept: finished in an earlier run (train:bct)"
    assert sum(" started " in line for line in lines) == 2 and sum(" done " in line for line in lines) == 2
    assert not any("train:bct done" in line for line in lines)  # a kept stage is not reported as run again
    times = {n: json.loads((tmp_path / f"{n}.times").read_text()) for n in ("eval-base", "eval-bct")}
    assert all(t[1] >= t[0] for t in times.values())  # what waited for the kept stage ran
    log = (tmp_path / "logs" / "eval-bct.log").read_text().splitlines()  # both attempts, the first one kept
    assert [line.startswith("--- attempt started 20") for line in log] == [True, False, True, False]
    assert log[1] == log[3] == "worked on eval-bct"
    assert (tmp_path / "logs" / "train-bct.log").read_text().count("--- attempt started") == 1


def test_a_failing_stage_stops_the_others_and_names_its_log(tmp_path: Path) -> None:
    stages = [Stage("train", "bct"), Stage("train", "opct"), Stage("eval", "bct", ("train:bct",)), Stage("eval", "base")]
    # train:bct fails once train:opct has started (its pid written; at most 10 s), so that the stop is what is tested even
    # when a loaded machine starts the second worker late
    script = _script(tmp_path, "if name == 'train-bct':\n"
                               "    for _ in range(1000):\n"
                               "        if os.path.exists(os.path.join(folder, 'train-opct.pid')): break\n"
                               "        time.sleep(0.01)\n"
                               "    sys.stderr.write('no pairs in organism:x\\n'); sys.exit(3)\n"
                               "time.sleep(30)\n")
    started = time.monotonic()
    with pytest.raises(StageFailedError, match=r"stage train:bct failed \(exit 3\)") as err:
        _run(tmp_path, stages, 2, script)
    assert time.monotonic() - started < 20  # train:opct was stopped, not waited for
    assert str(tmp_path / "logs" / "train-bct.log") in str(err.value) and "no pairs in organism:x" in str(err.value)
    assert not (tmp_path / "eval-bct.pid").exists() and not (tmp_path / "eval-base.pid").exists()  # none started after
    _gone(int((tmp_path / "train-opct.pid").read_text()))


def _gone(pid: int) -> None:
    """The process ``pid`` has exited and was reaped (no orphan left running)."""
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_interrupt_stops_every_worker_before_it_goes_on(tmp_path: Path) -> None:
    stages = [Stage("train", "bct"), Stage("train", "opct"), Stage("eval", "base")]
    script = _script(tmp_path, "time.sleep(60)\n")

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.5)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            _run(tmp_path, stages, 2, script)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 20
    pids = [int((tmp_path / f"{name}.pid").read_text()) for name in ("train-bct", "train-opct")]
    for pid in pids:
        _gone(pid)
    assert not (tmp_path / "eval-base.pid").exists()


@pytest.mark.parametrize("name", ["organism_demo.yaml", "organism_ablation.yaml", "organism_compute_matched.yaml"])
def test_a_worker_reads_the_experiment_it_was_handed(name: str, tmp_path: Path) -> None:
    """The settings a worker reads (``stages/settings.json``) are the experiment's, resolved: the same plan."""
    from opct.experiments.runner import load_experiment, resolve

    folder = DEMO.parent if name == DEMO.name else Path(str(files("opct_lab") / "studies"))  # the lab's study files
    cfg = load_experiment(folder / name, ["compare_rules=true"])
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(cfg.model_dump(mode="json")))
    again = load_experiment(path)
    assert again == cfg and resolve(again).describe() == resolve(cfg).describe()


def test_run_and_demo_take_jobs_and_a_worker_names_an_unknown_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import opct.cli.experiment
    from opct.cli.main import app

    seen: list[tuple] = []
    monkeypatch.setattr(opct.cli.experiment, "run_experiment_file", lambda *a, **k: seen.append((a, k)))
    monkeypatch.setattr(opct.cli.experiment, "available_cores", lambda: 5)
    assert CliRunner().invoke(app, ["demo", "--jobs", "3"]).exit_code == 0
    assert CliRunner().invoke(app, ["demo"]).exit_code == 0  # the default: auto, one job per available core
    assert CliRunner().invoke(app, ["demo", "--jobs", "auto"]).exit_code == 0
    assert [k["jobs"] for _, k in seen] == [3, 5, 5] and seen[1][0][0].name == "organism_demo.yaml"
    for bad in ("0", "two", "-1"):
        refused = CliRunner().invoke(app, ["demo", f"--jobs={bad}"], env={"COLUMNS": "300"})
        assert refused.exit_code == 2 and "or auto (one per core)" in refused.output
    monkeypatch.undo()
    result = CliRunner().invoke(app, ["run", "--stage", "train:nope", "--set", f"output_dir={tmp_path}",
                                      "--set", "methods=[base, opct]", "--set", "axes=[sycophancy]",
                                      str(DEMO)])
    assert result.exit_code == 2 and "train:opct" in result.output and "train:nope" in result.output, result.output
    assert not (tmp_path / "organism-demo").exists()  # a worker writes no plan of its own
