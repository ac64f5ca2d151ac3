"""``opct run --jobs N`` and ``opct-lab select --jobs N``: stages N at a time, each in its own process with one CPU thread.

:func:`run_stages` is the scheduler: it starts a stage's process once every stage it waits for has
finished, at most ``jobs`` at once, training runs first (they are the longest, and the others wait for
them), and each process's output goes to its own log file. A stage that fails stops the dispatch: the
stages still running are stopped (what they wrote is kept; a rerun continues them) and
:class:`StageFailedError` names the failed stage, its exit code and its log. Ctrl-C or SIGTERM (which
the CLI turns into ``KeyboardInterrupt``) stops every worker the same way before it goes on up (exit
130): no worker outlives the command. Each worker is a process group of its own, so a signal reaches
whatever it started too.

:func:`run_in_workers` runs an experiment's stages this way: each worker is ``opct run SETTINGS --stage
KIND:KEY --threads 1`` (with ``OPCT_THREADS=1`` and ``OMP_NUM_THREADS=1``) on the experiment's resolved
settings, and does exactly what ``--jobs 1`` does for that stage (:class:`~opct.experiments.stages.ExperimentStages`),
so results are the same files. On a rerun a training run that is complete with these settings is kept
without starting a worker (:meth:`~opct.experiments.stages.ExperimentStages.finished`); an eval or attack
gets its worker, which measures only what is missing. Each stage's log is appended to, never overwritten.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from opct.errors import FAULT, OpctError
from opct.experiments.stages import Stage
from opct.runs.atomic import write_json_atomic
from opct.runs.experiment_layout import ExperimentLayout

#: Seconds a stopped worker gets to exit after SIGTERM before it is killed.
STOP_GRACE_S = 30.0


class StageFailedError(OpctError, RuntimeError):
    """A stage's worker process exited with an error (its log names why)."""

    exit_code = FAULT


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(f"  | {line}" for line in text[-lines:])


def _stop(running: Mapping[str, tuple[subprocess.Popen[bytes], IO[bytes], float]], grace: float = STOP_GRACE_S) -> None:
    """SIGTERM every running worker's process group, wait up to ``grace`` seconds, then SIGKILL what is left."""
    for proc, _, _ in running.values():
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc, handle, _ in running.values():
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        handle.close()


def _dispatch_order(stages: Sequence[Stage]) -> list[Stage]:
    """Training runs first (the longest, and what the others wait for), otherwise as ``--jobs 1`` runs them."""
    return sorted(stages, key=lambda s: s.kind != "train")


def _open_log(path: Path) -> IO[bytes]:
    """A stage's log, opened to append: a rerun adds its attempt below what the earlier ones wrote."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("ab")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    handle.write(f"--- attempt started {stamp} ---\n".encode())
    handle.flush()
    return handle


def run_stages(stages: Sequence[Stage], jobs: int, command: Callable[[Stage], list[str]],
               log_path: Callable[[Stage], Path], log: Callable[[str], Any] = print,
               env: Mapping[str, str] | None = None, poll_s: float = 0.1, grace_s: float = STOP_GRACE_S,
               finished: Callable[[Stage], bool] | None = None) -> list[str]:
    """Run every stage's ``command`` as its own process, ``jobs`` at a time, each once the stages it
    waits for (``Stage.after``) have finished; its stdout and stderr are appended to ``log_path(stage)``
    (each attempt under a ``--- attempt started <UTC time> ---`` line, so a rerun keeps the earlier
    logs). A stage for which ``finished(stage)`` is true is kept as it is, without a process, and
    logged as ``kept``. Returns the kept stages' names. Raises :class:`StageFailedError` for the first
    stage that fails (the running ones stopped, none started after it), and lets ``KeyboardInterrupt``
    through once every worker is stopped."""
    names = {s.name for s in stages}
    unknown = sorted({d for s in stages for d in s.after} - names)
    if unknown:
        raise ValueError(f"stages wait for stages that are not there: {', '.join(unknown)}")
    kept = [s.name for s in stages if finished is not None and finished(s)]
    pending = [s for s in _dispatch_order(stages) if s.name not in kept]
    running: dict[str, tuple[subprocess.Popen[bytes], IO[bytes], float]] = {}
    done: set[str] = set(kept)
    if kept:
        log(f"[stage] {len(kept)} of {len(stages)} stages kept: finished in an earlier run ({', '.join(kept)})")
    try:
        while pending or running:
            for stage in [s for s in pending if all(d in done for d in s.after)]:
                if len(running) >= jobs:
                    break
                path = log_path(stage)
                handle = _open_log(path)
                proc = subprocess.Popen(command(stage), stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=dict(env) if env is not None else None, start_new_session=True)
                running[stage.name] = (proc, handle, time.monotonic())
                pending.remove(stage)
                log(f"[stage] {stage.name} started (pid {proc.pid}; log {path})")
            if not running:
                raise ValueError(f"stages wait for each other: {', '.join(s.name for s in pending)}")
            time.sleep(poll_s)
            for name, (proc, handle, started) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                handle.close()
                del running[name]
                stage = next(s for s in stages if s.name == name)
                if code != 0:
                    _stop(running, grace_s)
                    running.clear()
                    stopped = f"; {len(pending)} stage(s) not started" if pending else ""
                    raise StageFailedError(f"stage {name} failed (exit {code}){stopped}; its log: {log_path(stage)}\n"
                                           f"{_log_tail(log_path(stage))}\nFix it and rerun the same command: finished "
                                           "stages are kept and skipped, interrupted ones continue.")
                done.add(name)
                log(f"[stage] {name} done ({time.monotonic() - started:.0f} s; {len(done)} of {len(stages)})")
    except BaseException:
        _stop(running, grace_s)
        raise
    return kept


def worker_command(settings: Path, stage: Stage, force: Sequence[str]) -> list[str]:
    """The ``opct`` command a worker runs for ``stage``: one thread, no progress bar, the same ``--force``."""
    return [sys.executable, "-m", "opct.cli", "run", str(settings), "--stage", stage.name, "--no-progress",
            "--threads", "1", *(f"--force={item}" for item in force)]


def worker_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker: this one, with one CPU thread for torch and OpenMP."""
    return {**(os.environ if base is None else base), "OPCT_THREADS": "1", "OMP_NUM_THREADS": "1"}


def run_in_workers(cfg: Any, stages: Sequence[Stage], jobs: int, force: Sequence[str] = (),
                   log: Callable[[str], Any] = print, finished: Callable[[Stage], bool] | None = None) -> list[str]:
    """Run an experiment's stages in ``jobs`` worker processes (:func:`run_stages`; ``finished`` names the
    stages to keep without a worker, training runs that are complete); returns the lines of its incomplete
    evals and attacks, in the order ``--jobs 1`` reports them."""
    import json

    layout = ExperimentLayout(cfg.root)
    layout.stages.mkdir(parents=True, exist_ok=True)
    write_json_atomic(layout.worker_settings, cfg.model_dump(mode="json"))
    for stage in stages:  # an outcome is read only from this run's workers
        layout.stage_outcome(stage.name).unlink(missing_ok=True)
    log(f"[stage] {len(stages)} stages, {jobs} at a time, each in its own process with one CPU thread; logs in {layout.stages}")
    kept = run_stages(stages, jobs, lambda s: worker_command(layout.worker_settings, s, force),
                      lambda s: layout.stage_log(s.name), log, env=worker_environment(), finished=finished)
    unfinished: list[str] = []
    for stage in [s for s in stages if s.name not in kept]:  # a kept stage is a finished training run
        unfinished += json.loads(layout.stage_outcome(stage.name).read_text(encoding="utf-8"))["unfinished"]
    return unfinished
