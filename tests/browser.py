"""A real headless Chromium for the report tests: find it, run it, read the size of its screenshots."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--hide-scrollbars",
)
#: Why a browser test skips: the only reason it may.
NO_BROWSER = "no chromium binary found (apt-get install -y chromium, or set OPCT_CHROMIUM)"


def find_browser() -> str | None:
    """``$OPCT_CHROMIUM``, else the first Chromium or Chrome on the PATH; None when there is none."""
    if os.environ.get("OPCT_CHROMIUM"):
        return os.environ["OPCT_CHROMIUM"]
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def run_browser(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the headless browser with its own profile folder ``profile`` and ``args``."""
    cmd = [browser, *BROWSER_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=40, check=False)


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of the PNG at ``path`` (asserts it is one)."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])
