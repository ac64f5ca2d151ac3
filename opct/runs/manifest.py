"""Run manifests: what was run, on what, with which versions, so any result can be reproduced."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("opct", "torch", "transformers", "peft", "accelerate", "datasets", "tokenizers", "safetensors")


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


#: The tested versions beside a source checkout (the repository's ``constraints.txt``, installed by ``make setup``).
CONSTRAINTS_FILE = Path(__file__).resolve().parents[2] / "constraints.txt"


@functools.lru_cache(maxsize=8)  # read once per process: every manifest asks, and installed versions do not move
def tested_versions(path: Path = CONSTRAINTS_FILE) -> dict[str, Any] | None:
    """Whether the installed packages are the tested ones: ``path``'s sha256, how many of its ``name==version``
    pins are installed at that version, and each installed one that differs (tested, installed); a pinned
    package that is not installed is not counted. ``None`` when there is no constraints file (an install from
    a wheel, not from a checkout)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    pins = dict(line.split("==", 1) for line in (raw.split("#", 1)[0].strip() for raw in text.splitlines()) if "==" in line)
    differs: dict[str, dict[str, str]] = {}
    matched = 0
    for name, version in pins.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        if installed == version:
            matched += 1
        else:
            differs[name] = {"tested": version, "installed": installed}
    return {"file": path.name, "sha256": hashlib.sha256(text.encode()).hexdigest(), "matched": matched,
            "differs": differs}


def git_commit(path: Path | None = None) -> str | None:
    """The commit of the source tree opct runs from, if it is a git checkout."""
    here = path or Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def hash_records(records: list[dict[str, Any]]) -> str:
    """A content hash of JSON-serialisable records (order matters)."""
    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps(r, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """The sha256 of a file's bytes, read in chunks (checkpoints can be many gigabytes)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def build_manifest(kind: str, config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """Manifest common to every run: kind, config, versions, commit, command line, time."""
    return {
        "kind": kind,
        "config": config,
        "versions": package_versions(),
        "tested_versions": copy.deepcopy(tested_versions()),  # the cached record stays as read
        "opct_commit": git_commit(),
        "command": sys.argv,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **fields,
    }


def keep_history(path: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` for a run resumed in place of the one at ``path``: the first start's ``created`` is
    kept, and this start's time is appended to ``resumed`` (unchanged when ``path`` holds no readable
    manifest with a ``created``)."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return manifest
    if not isinstance(old, dict) or not isinstance(old.get("created"), str):
        return manifest
    earlier = old.get("resumed") if isinstance(old.get("resumed"), list) else []
    return {**manifest, "created": old["created"], "resumed": [*earlier, manifest.get("created")]}
