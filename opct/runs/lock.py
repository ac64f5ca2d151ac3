"""One process trains in a run directory at a time: a ``filelock.FileLock`` on its ``.lock``, and
running a step of the run's bookkeeping on the main process only.

The lock file holds the holder's pid and host (written through ``FileLock``'s ``on_acquired`` hook, so a
process that fails to take the lock never overwrites them); the lock is an ``flock`` held by an open
file, so the kernel drops it when the process ends, however it ends, and a ``.lock`` left by a process
that died holds nothing. The file is kept on release (``preserve_lock_file``): a waiter and the next
holder share one inode.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from filelock import FileLock, Timeout

from opct.runs.errors import RunDirError, RunLockedError
from opct.runs.layout import RunLayout, layout_of

if TYPE_CHECKING:  # only a type here: importing accelerate loads torch, which the command line must not load early
    from accelerate import Accelerator

T = TypeVar("T")


def on_main(acc: Accelerator, fn: Callable[[], T]) -> T:
    """Run ``fn`` on the main process only and hand its result to every process; its
    :class:`RunDirError` (or ``OSError``/``ValueError``) is raised on every process."""
    result: Any = None
    error: BaseException | None = None
    if acc.is_main_process:
        try:
            result = fn()
        except (RunDirError, OSError, ValueError) as err:
            if acc.num_processes == 1:
                raise
            error = err
    if acc.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        box = [(result, error)]
        broadcast_object_list(box, from_process=0)
        result, error = box[0]
    if error is not None:
        raise error
    return result


def _write_holder(fd: int) -> None:
    """Write this process's pid and host into the lock file just taken (``fd``: filelock's descriptor)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)


def _holder(path: Path) -> str:
    """``pid N`` (and `` on HOST`` when another machine's) of the process the lock file names."""
    try:
        holder = path.read_bytes()[:256].decode("utf-8", "replace").split()
    except OSError:
        holder = []
    pid = holder[0] if holder else "unknown"
    host = f" on {holder[1]}" if len(holder) > 1 and holder[1] != socket.gethostname() else ""
    return f"pid {pid}{host}"


def try_lock(path: Path) -> tuple[FileLock | None, str | None]:
    """``(lock, None)`` holding ``path`` (release it with ``lock.release()``), or ``(None, "pid N ...")``
    naming its holder. Never waits."""
    lock = FileLock(path, timeout=0, mode=0o644, on_acquired=_write_holder, preserve_lock_file=True)
    try:
        lock.acquire()
    except Timeout:
        return None, _holder(path)
    return lock, None


@contextmanager
def run_lock(run: RunLayout | Path, acc: Accelerator) -> Iterator[None]:
    """Hold the run's ``.lock`` while training; if another process holds it, raise :class:`RunLockedError`
    naming its pid. The lock is filelock's ``flock``: a ``.lock`` left by a process that died holds nothing."""
    layout = layout_of(run)
    run_dir = layout.root
    held: FileLock | None = None

    def take() -> str | None:
        nonlocal held
        run_dir.mkdir(parents=True, exist_ok=True)
        held, holder = try_lock(layout.lock)
        return holder

    holder = on_main(acc, take)
    if holder is not None:
        raise RunLockedError(
            f"{run_dir} is in use by another training ({holder} holds {layout.lock}); "
            "wait for it to end, or stop it, then rerun."
        )
    try:
        yield
    finally:
        if held is not None:
            held.release()
