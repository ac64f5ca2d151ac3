"""What every ``opct`` subcommand shares: the consoles, the one way to fail, and the error boundary.

:class:`ErrorBoundary` is the command group every ``opct`` command runs in: an exception that reaches
it is printed as ``error: <message>`` (see :func:`opct.errors.describe`) and the process exits with the
error's code; the traceback is shown only with ``opct --debug ...`` or ``OPCT_DEBUG=1``.

A message that can carry user text (a pair id, a path, a model name) is printed as plain text, never
read as Rich markup: only its label is styled (:func:`labelled`, :func:`with_path`), so ``[/x]`` or
``[link=...]`` in a user's text is shown as written and cannot crash the printer or style the terminal.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import click
import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from opct.cli.help import conventional_help, conventional_params, tidy_command_help
from opct.errors import INTERRUPTED, describe, redact_secrets

console = Console()
err_console = Console(stderr=True)


def labelled(label: str, message: str, style: str = "bold red") -> Text:
    """``label message`` as one line of text with only ``label`` styled: ``message`` (which may hold a user's
    ids, paths and model names) is plain text, never markup, with any URL password as ``***``."""
    return Text.assemble((label, style), *((" ", redact_secrets(message)) if message else ()))


def with_path(prefix: str, path: object, suffix: str = "") -> Text:
    """``prefix`` then ``path`` in bold then ``suffix``, all plain text (a path is never read as markup)."""
    return Text.assemble(prefix, (str(path), "bold"), suffix)


def print_problem(label: str, message: str, style: str = "bold red") -> None:
    """Print :func:`labelled` on stderr, unwrapped and unhighlighted (``error:``, ``incomplete:``, ``skipped:``)."""
    err_console.print(labelled(label, message, style), highlight=False, soft_wrap=True)


def _fail(message: str, code: int = 2) -> None:
    """Print ``error: message`` on stderr and exit with ``code`` (2: bad input; 1: a measurement failed)."""
    print_problem("error:", message)
    raise typer.Exit(code)


#: ``--set key.sub=value`` (repeatable), the same on every command that reads a configuration.
SetOverrides = Annotated[list[str] | None, typer.Option(
    "--set", metavar="KEY=VALUE", help="Override a setting: key.sub=value (repeatable).")]

#: ``--no-progress`` on every command that runs a model.
NoProgress = Annotated[bool, typer.Option("--no-progress", help="Hide the progress bar.")]
#: The two options every command group's callback takes (``opct`` and ``opct-lab``).
DebugFlag = Annotated[bool, typer.Option("--debug", help="Show the traceback of an error (also OPCT_DEBUG=1).")]
VerboseFlag = Annotated[bool, typer.Option("--verbose", help="Keep the libraries' own logs, progress bars and warnings "
                                           "(also OPCT_VERBOSE=1).")]

#: The CPU threads when ``--threads`` is not given; ``None`` leaves torch's own choice (one per core).
#: ``benchmarks/threads.py`` (organism eval generation, 128 prompts x 48 tokens, 2-core CPU) measured
#: torch's 2 threads 1.45x faster than 1 on a quiet machine (``benchmarks/results/threads.json``), so
#: opct keeps torch's default; under a neighbour's load 1 thread was 4.5x faster than 2
#: (``threads-busy.json``), which is what ``--threads 1`` is for.
DEFAULT_THREADS: int | None = None

#: ``--threads N`` on every command that runs a model.
Threads = Annotated[int | None, typer.Option(
    "--threads", metavar="N", min=1, envvar="OPCT_THREADS", show_envvar=False,
    help="CPU threads for torch (also OPCT_THREADS); default: torch's own, one per core. Where other "
         "processes share the cores, fewer is faster (docs: Development, CPU threads).")]


def cgroup_cpu_limit(root: str = "/sys/fs/cgroup") -> float | None:
    """The CPUs a cgroup quota allows this process (``quota / period``), or None without a quota.

    cgroup v2: ``cpu.max`` (``"max 100000"`` or ``"150000 100000"``) of this process's own cgroup (from
    ``/proc/self/cgroup``) or of ``root``; cgroup v1: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` under
    ``root/cpu`` or ``root/cpu,cpuacct`` (a quota of -1: none). The smallest quota found counts.
    """
    found: list[float] = []
    own = ""
    try:
        with open("/proc/self/cgroup") as f:
            own = next((line.split(":", 2)[2].strip() for line in f if line.startswith("0::")), "")
    except OSError:
        pass
    for folder in {os.path.join(root, own.lstrip("/")), root}:
        try:
            with open(os.path.join(folder, "cpu.max")) as f:
                quota, period = f.read().split()[:2]
            if quota != "max" and float(period) > 0:
                found.append(float(quota) / float(period))
        except (OSError, ValueError):
            pass
    for sub in ("cpu", "cpu,cpuacct"):
        try:
            with open(os.path.join(root, sub, "cpu.cfs_quota_us")) as f:
                quota_us = float(f.read())
            with open(os.path.join(root, sub, "cpu.cfs_period_us")) as f:
                period_us = float(f.read())
            if quota_us > 0 and period_us > 0:
                found.append(quota_us / period_us)
        except (OSError, ValueError):
            pass
    return min(found) if found else None


def available_cores(cgroup_root: str = "/sys/fs/cgroup") -> int:
    """The CPUs this process may use: its affinity mask, capped by a cgroup quota (rounded up), at least 1.

    torch's default thread count follows the affinity mask but not a container's CPU quota; with a
    quota of 2 CPUs on a 64-core host it would start 64 threads that the quota then throttles.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = cgroup_cpu_limit(cgroup_root)
    if limit is not None:
        cores = min(cores, math.ceil(limit))
    return max(1, cores)


def passive_waiting_when_busy(environ: Any = os.environ, load: float | None = None, cores: int | None = None) -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` when the machine is already busy as opct starts; returns whether it did.

    Busy: the 1-minute load average is at least the cores available (:func:`available_cores`). An
    OpenMP thread waiting for its siblings spins on its core by default; when other processes need
    that core, the spinning takes it from them and from the sibling it waits for. On the project's
    2 shared cores (load average 10-13) three organism trainings with torch's 2 threads took 4.7-36 s
    a step spinning and a median 2.1 s with passive waiting (``benchmarks/contention.py``). On a quiet
    machine nothing changes. A value the user set is kept, and ``OPCT_PASSIVE_WAIT=0`` turns this off.
    It must run before torch is imported (OpenMP reads it when it loads): ``opct.cli`` calls it on
    import, and the processes opct starts inherit it. It changes no result, only how idle threads wait.
    """
    if "OMP_WAIT_POLICY" in environ or environ.get("OPCT_PASSIVE_WAIT") == "0":
        return False
    load = os.getloadavg()[0] if load is None and hasattr(os, "getloadavg") else (load or 0.0)
    if load < (cores if cores is not None else available_cores()):
        return False
    environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True


def apply_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)`` before any model work: when ``--threads`` is given, or when
    :data:`DEFAULT_THREADS` differs from torch's default; otherwise torch keeps its own default, cut to
    :func:`available_cores` where that is fewer (a container's CPU quota, which torch does not read)."""
    wanted = threads if threads is not None else DEFAULT_THREADS
    import torch

    if wanted is None:
        cores = available_cores()
        if torch.get_num_threads() > cores:
            torch.set_num_threads(cores)
        return
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


#: Set by ``opct --debug``: let exceptions through with their traceback.
DEBUG = {"on": False}


def debug_enabled() -> bool:
    """Whether tracebacks are wanted (``--debug`` or ``OPCT_DEBUG=1``)."""
    return DEBUG["on"] or os.environ.get("OPCT_DEBUG", "") not in ("", "0")


#: Exits and usage errors (an unknown option, a bad value) that Typer itself reports, with exit 2 and the
#: usage line for a usage error: click's, and Typer's own where it carries its own click (0.2x).
_COMMAND_LINE_EXITS: tuple[type[BaseException], ...] = (
    typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException, click.exceptions.Abort,
    *((typer.exceptions.TyperException,) if hasattr(typer.exceptions, "TyperException") else ()),
)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler's stop) handled as Ctrl-C: what is written is kept, the command says
    how to continue and exits 130. Only the main thread can take signals; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        # After the command: the process may still be closing (a tracker's uploader, threads joining). A SIGTERM
        # then says so instead of ending with 143 and no word; a handler someone else installed is put back.
        signal.signal(signal.SIGTERM, _terminated_after_finish if previous == signal.SIG_DFL else previous)


#: What a SIGTERM that arrives after the command finished prints (then the process exits 130, :data:`INTERRUPTED`).
LATE_SIGTERM = "interrupted while exiting: the command had finished and everything it wrote is kept; nothing to rerun."


def _terminated_after_finish(signum: int, frame: Any) -> None:
    """SIGTERM once the command is done: one line on stderr, exit 130 at once (nothing is left to keep)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(LATE_SIGTERM + "\n")
        sys.stderr.flush()
    os._exit(INTERRUPTED)


#: Commands that are the lab's, not the library's: ``opct <name> ...`` is a usage error (exit 2) whose message
#: gives the ``opct-lab`` command to run instead, with the same arguments.
LAB_COMMANDS = {"select": "recipe selection"}


def lab_command_hint(args: list[str]) -> str | None:
    """For the arguments ``select x.yaml`` given to opct: where the command lives (``opct-lab select x.yaml``, in
    the lab); None for any other command line."""
    if not args or args[0] not in LAB_COMMANDS:
        return None
    command = shlex.join(["opct-lab", *args])
    return f"{LAB_COMMANDS[args[0]]} is the lab's: `{command}` (pip install -e ./lab; docs/development.md)"


class ErrorBoundary(TyperGroup):
    """The ``opct`` command group: every error becomes one or two lines and an exit code, and every
    command's help names values conventionally (:mod:`opct.cli.help`). A command of the lab's
    (:data:`LAB_COMMANDS`) is an unknown command here whose message names the ``opct-lab`` command."""

    def get_params(self, ctx: click.Context) -> list[Any]:
        tidy_command_help(self)
        return conventional_params(super().get_params(ctx), ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            conventional_help(command, ctx)
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except _COMMAND_LINE_EXITS as err:  # "No such command": click's UsageError, or Typer's own click's
            message = getattr(err, "message", None)
            if isinstance(message, str) and self.get_command(ctx, args[0] if args else "") is None and (hint := lab_command_hint(args)):
                err.message = f"{message.rstrip('.')}: {hint}."
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with _sigterm_as_interrupt():
                return super().invoke(ctx)
        except _COMMAND_LINE_EXITS:
            raise
        except KeyboardInterrupt:
            if debug_enabled():
                raise
            err_console.print("interrupted: everything written so far is kept; rerun the same command to continue.")
            raise typer.Exit(INTERRUPTED) from None
        except Exception as err:
            if debug_enabled():
                raise
            code, message = describe(err)
            print_problem("error:", message)
            if code != 2:
                err_console.print("(opct --debug ... shows the traceback)", highlight=False)
            raise typer.Exit(code) from None
