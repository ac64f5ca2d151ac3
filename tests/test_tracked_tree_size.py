"""The tracked tree fits the GPU machine's transfer with room to spare (issue 70).

The device tool carries the working tree to the GPU machine up to 64 MiB (its README in the tool library). The
tracked files must leave at least 15 MB of that free: for the device check's carried venv and what a run writes
beside the tree. Weights that can be built from a recipe (the lab's level builds) are built, not tracked.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What the device tool carries: the working tree up to 64 MiB.
TRANSFER_BYTES = 64 * 2**20
#: What the tracked files must leave free of it.
SPARE_BYTES = 15_000_000


def tracked_sizes(root: Path) -> dict[str, int]:
    """``{path: bytes}`` of every file git tracks under ``root`` (a file deleted but not yet committed counts 0)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    paths = [p for p in listed.decode().split("\0") if p]
    return {p: (root / p).stat().st_size if (root / p).is_file() else 0 for p in paths}


def test_the_tracked_files_leave_15_mb_of_the_device_transfer_free():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an installed copy has no tracked tree)")
    sizes = tracked_sizes(ROOT)
    total = sum(sizes.values())
    largest = ", ".join(f"{p} ({n / 1e6:.1f} MB)" for p, n in sorted(sizes.items(), key=lambda kv: -kv[1])[:5])
    assert total <= TRANSFER_BYTES - SPARE_BYTES, (
        f"the tracked files are {total / 1e6:.1f} MB; at most {(TRANSFER_BYTES - SPARE_BYTES) / 1e6:.1f} MB leaves "
        f"15 MB of the device transfer's 64 MiB free. Largest: {largest}")
