"""What a training run shows while it trains: a progress bar, or with ``--no-progress`` a line now and then.

Without the bar a long run is never silent: :class:`StepLines` prints ``step N/M`` with the loss at the
first step, the last, and at most every :data:`LINE_EVERY_S` seconds between (on stderr), so that a
run of a thousand steps says where it is and one that would never end shows it.
"""

from __future__ import annotations

import sys
import time
from typing import Any

#: Seconds between two ``step N/M`` lines when the progress bar is off.
LINE_EVERY_S = 30.0


class _Silent:
    """No output at all (a process other than the main one)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class StepLines:
    """The progress bar's ``add_task``/``update`` as a line at the first and last step and every
    ``every`` seconds: ``opct t: step 20/120, loss 0.4312, kl 0.0210 (35 s)``."""

    def __init__(self, every: float = LINE_EVERY_S, stream: Any = None) -> None:
        self.every = every
        self.stream = stream
        self._start = self._last = time.monotonic()
        self._tasks: dict[int, tuple[str, int]] = {}

    def __enter__(self) -> StepLines:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: int, completed: int = 0, **fields: Any) -> int:
        """Start counting ``description``'s ``total`` steps; says where a resumed run starts."""
        task = len(self._tasks)
        self._tasks[task] = (description, total)
        if completed:
            self._print(f"{description}: resuming at step {completed}/{total}")
        return task

    def update(self, task: int, completed: int, loss: str = "-", kl: str = "-", **fields: Any) -> None:
        """A line when this is the first or last step, or ``every`` seconds have passed since the last line."""
        description, total = self._tasks[task]
        now = time.monotonic()
        if completed in (1, total) or now - self._last >= self.every:
            self._last = now
            self._print(f"{description}: step {completed}/{total}, loss {loss}, kl {kl} ({now - self._start:.0f} s)")

    def _print(self, line: str) -> None:
        print(line, file=self.stream or sys.stderr, flush=True)


def training_progress(show_bar: bool, main_process: bool) -> Any:
    """The main process's progress bar (``show_bar``) or :class:`StepLines`; nothing on other processes."""
    if not main_process:
        return _Silent()
    if not show_bar:
        return StepLines()
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}  kl {task.fields[kl]}"),  # "-" until this call's first step
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
