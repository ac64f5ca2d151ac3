"""One process trains in a run directory at a time: an ``flock`` on its ``.lock``, and running a
step of the run's bookkeeping on the main process only.

The lock file holds the holder's pid and host; the kernel drops the lock when the process ends,
however it ends, so a ``.lock`` left by a process that died holds nothing.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from accelerate import Accelerator

from opct.runs.errors import RunDirError, RunLockedError
from opct.runs.layout import RunLayout, layout_of

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


def _try_lock(path: Path) -> tuple[int | None, str | None]:
    """``(fd, None)`` holding the lock, or ``(None, "pid N ...")`` naming its holder."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
        os.close(fd)
        pid = holder[0] if holder else "unknown"
        host = f" on {holder[1]}" if len(holder) > 1 and holder[1] != socket.gethostname() else ""
        return None, f"pid {pid}{host}"
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    return fd, None


@contextmanager
def run_lock(run: RunLayout | Path, acc: Accelerator) -> Iterator[None]:
    """Hold the run's ``.lock`` while training; if another process holds it, raise :class:`RunLockedError`
    naming its pid. The lock is an ``flock``: a ``.lock`` left by a process that died holds nothing."""
    layout = layout_of(run)
    run_dir = layout.root
    fd: int | None = None

    def take() -> str | None:
        nonlocal fd
        run_dir.mkdir(parents=True, exist_ok=True)
        fd, holder = _try_lock(layout.lock)
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
        if fd is not None:
            os.close(fd)
