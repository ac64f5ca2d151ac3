r"""Reading a device-check section's log: the first Python traceback in it, and one line that says why it failed.

A section's log (``logs/<section>.log``) holds its own output and, copied in line by line as they run, the
whole output of the processes it starts (``opct train``, ``accelerate launch`` and its workers). When one
of them fails, the first traceback in the log is the real error; what comes after it (torch elastic's
``ChildFailedError`` summary, the section's own ``RuntimeError``) only reports that something failed.
Used by ``device_check.py`` (the summary line) and ``device_sections.py`` (the error a section raises);
tested on recorded logs in ``tests/test_device_check.py``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TRACEBACK_HEADER = "Traceback (most recent call last):"
#: What a launcher puts before each line of a worker's output: torchrun's ``[rank0]:``, ``--tee``'s ``[default0]:``.
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")
_FILE_LINE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
MAX_TRACEBACK_CHARS = 4000


def _plain(line: str) -> str:
    return _RANK_PREFIX.sub("", line.rstrip("\r\n"))


def first_traceback(text: str) -> list[str] | None:
    """The lines of the first Python traceback in ``text`` (launcher prefixes removed), from its
    ``Traceback`` line through the exception line that ends it; None when there is none.

    The exception line is the first line after the header that is not indented (a ``File`` line, its
    source line and its ``^^^`` markers are); a traceback cut off before it ends at the last line.
    """
    lines = [_plain(line) for line in text.splitlines()]
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == TRACEBACK_HEADER)
    except StopIteration:
        return None
    block = [lines[start].strip()]
    for line in lines[start + 1:]:
        block.append(line)
        if line.strip() and not line[0].isspace():
            break
    return block


def _meaningful(line: str) -> bool:
    return any(ch.isalnum() for ch in line)


def first_error(text: str) -> str:
    """One line saying why a run failed: the first traceback's exception and where it was raised
    (``AttributeError: ... (fsdp.py:160 in gathered)``), else the last line of ``text`` with a letter or digit
    in it (separator lines such as ``=====`` say nothing), else ``no output``."""
    block = first_traceback(text)
    if block and len(block) > 1:
        exception = block[-1].strip()
        where = [m for m in map(_FILE_LINE.match, block) if m]
        if where:
            last = where[-1]
            exception += f" ({Path(last['path']).name}:{last['line']} in {last['func']})"
        return exception
    return last_line(text)


def last_line(text: str) -> str:
    """The last line of ``text`` with a letter or digit in it (how far a stopped run got), else ``no output``."""
    lines = [_plain(line).strip() for line in text.splitlines()]
    return next((line for line in reversed(lines) if _meaningful(line)), "no output")


def traceback_text(text: str) -> str | None:
    """The first traceback of ``text`` as one string (at most :data:`MAX_TRACEBACK_CHARS`, its end kept),
    for the JSON report; None when there is none."""
    block = first_traceback(text)
    if block is None:
        return None
    joined = "\n".join(block)
    return joined if len(joined) <= MAX_TRACEBACK_CHARS else "...\n" + joined[-MAX_TRACEBACK_CHARS:]


class ChildFailed(RuntimeError):
    """A process a section started exited non-zero; the message names it and its first error."""


def run_logged(cmd: list[str], what: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``cmd``, copying its stdout and stderr line by line into this process's stdout (the section's
    log) as they come, so the log keeps all of it even when the section is stopped for time.

    Returns the whole output; raises :class:`ChildFailed` (``<what> exited N: <first error>``) when it
    exits non-zero.
    """
    print(f"--- {what}: {' '.join(cmd)}", flush=True)
    kept: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                          cwd=cwd, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            kept.append(line)
        code = proc.wait()
    output = "".join(kept)
    print(f"--- {what} exited {code}", flush=True)
    if code != 0:
        raise ChildFailed(f"{what} exited {code}: {first_error(output)}")
    return output
