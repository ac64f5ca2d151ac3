"""``opct data fetch`` and ``opct data verify``: download the pinned benchmark copies
(:data:`opct.datasets.catalog.PINNED`) and check local copies against their hashes.

A fetch writes ``<DIR>/<name>/`` as a ``save_to_disk`` folder (the layout ``eval.data_dir`` reads),
downloading into a hidden temporary folder beside it and renaming it into place only once every file
and the content hash verified, so an interrupted or corrupt download leaves nothing behind.

Sources: ``github`` (default) downloads the authors' files at the pinned commit from
``raw.githubusercontent.com`` (``OPCT_DATA_MIRROR`` names another base URL: an internal mirror, or a
``file://`` folder laid out as ``<owner>/<repo>/<commit>/datasets/<name>/``); ``hub`` loads the pinned
hub revision with ``datasets`` (only for data sets whose hub revision is the data: IFEval). Either way
the host must answer within the timeout first, so a machine without network fails in seconds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from opct.datasets.catalog import PINNED, PinnedDataset, canonical_sha256, pinned
from opct.datasets.errors import DataFetchError, DatasetFormatError
from opct.datasets.sources import (
    NETWORK_TIMEOUT,
    HubSpec,
    check_reachable,
    hub_endpoint,
    hub_offline,
    load_hub,
)
from opct.datasets.tabular import iter_rows

__all__ = ["SOURCES", "CopyCheck", "check_copy", "fetch", "find_copy", "mirror_base", "verify"]

SOURCES = ("github", "hub")
DEFAULT_MIRROR = "https://raw.githubusercontent.com"
#: Local exports ``verify`` also recognises, beside ``<name>/`` folders.
EXPORT_SUFFIXES = (".parquet", ".jsonl")


@dataclass(frozen=True)
class CopyCheck:
    """What :func:`check_copy` found: ``status`` is ``ok``, ``absent``, ``differs`` or ``unreadable``;
    ``identical_files`` whether the folder's files are byte-identical to the pinned ones."""

    name: str
    path: str | None
    status: str
    rows: int | None = None
    identical_files: bool = False
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Whether the copy holds the pinned content."""
        return self.status == "ok"


def mirror_base() -> str:
    """The base URL of raw files: ``OPCT_DATA_MIRROR`` or ``https://raw.githubusercontent.com``."""
    return (os.environ.get("OPCT_DATA_MIRROR", "").strip() or DEFAULT_MIRROR).rstrip("/")


def find_copy(root: str | os.PathLike[str], entry: PinnedDataset) -> Path | None:
    """``<root>/<name>/`` or ``<root>/<name>.parquet`` / ``.jsonl``, the first that exists."""
    base = Path(root)
    for candidate in (base / entry.name, *(base / f"{entry.name}{s}" for s in EXPORT_SUFFIXES)):
        if candidate.exists():
            return candidate
    return None


def check_copy(entry: PinnedDataset, path: str | os.PathLike[str]) -> CopyCheck:
    """Re-hash one local copy (a ``save_to_disk`` folder, or a Parquet/JSONL export) against ``entry``."""
    p = Path(path)
    identical = p.is_dir() and all(
        (p / f.name).is_file() and _sha256_file(p / f.name) == f.sha256 for f in entry.files)
    try:
        digest, n = canonical_sha256(r.values for r in iter_rows(p, "hf_disk" if p.is_dir() else None))
    except DatasetFormatError as exc:
        return CopyCheck(entry.name, str(p), "unreadable", detail=str(exc))
    if digest != entry.content_sha256:
        why = f"{n} rows, expected {entry.rows}" if n != entry.rows else "same row count, different content"
        return CopyCheck(entry.name, str(p), "differs", n, identical,
                         f"content sha256 {digest[:12]}… is not the pinned {entry.content_sha256[:12]}… ({why})")
    return CopyCheck(entry.name, str(p), "ok", n, identical,
                     "identical files" if identical else "same content (files re-saved or exported)")


def verify(root: str | os.PathLike[str], names: Sequence[str] = ()) -> list[CopyCheck]:
    """Check every pinned data set (or those named) found under ``root``; absent ones are reported."""
    if not Path(root).is_dir():
        raise DatasetFormatError(root, "no such folder", hint="give the folder that holds math-500/, ifeval/, ...")
    checks = []
    for entry in _entries(names):
        found = find_copy(root, entry)
        checks.append(check_copy(entry, found) if found else CopyCheck(entry.name, None, "absent"))
    return checks


#: ``claim(path, is_own)``: raise unless ``path`` may be written (absent, empty, or ``is_own(path)``); the command
#: line passes :func:`opct.runs.outputs.claim_output` (this package imports nothing above it).
Claim = Callable[[Path, Callable[[Path], bool]], None]


def is_fetched_copy(path: Path, entry: PinnedDataset) -> bool:
    """Whether ``path`` holds only what a fetch of ``entry`` writes (its files, a ``save_to_disk`` folder's
    ``data-*.arrow``, ``dataset_info.json`` and ``state.json``): an earlier copy, perhaps damaged, that
    ``--force`` may replace. A folder with anything else in it is someone else's."""
    if not path.is_dir() or path.is_symlink():
        return False
    own = {f.name for f in entry.files} | {"dataset_info.json", "state.json"}
    return all(p.is_file() and (p.name in own or (p.name.startswith("data-") and p.suffix == ".arrow"))
               for p in path.iterdir())


def fetch(names: Sequence[str], to: str | os.PathLike[str], *, source: str = "github",
          timeout: float = NETWORK_TIMEOUT, force: bool = False, claim: Claim | None = None) -> list[CopyCheck]:
    """Download the pinned data sets ``names`` (all when empty) into ``<to>/<name>/`` and verify them.

    A copy already there that verifies is kept; one that does not is an error unless ``force``
    (then it is replaced). With ``claim``, a ``<name>`` there that is not an earlier fetch's copy
    (:func:`is_fetched_copy`: a folder of other files, a file) is refused by it, ``force`` or not. Raises :class:`DataFetchError` when the host does not answer within
    ``timeout`` seconds, a download fails or a hash differs.
    """
    if source not in SOURCES:
        raise DatasetFormatError(source, "unknown source", hint=f"choose from {', '.join(SOURCES)}")
    entries = _entries(names)
    if source == "hub":
        no_hub = [e.name for e in entries if not e.hub_copy]
        if no_hub:
            raise DatasetFormatError(
                ", ".join(no_hub), "no pinned hub revision holds this data (the OPCT authors prepared it from the hub "
                "at an unrecorded revision)", hint="fetch it with --from github (the default)")
    root = Path(to)
    todo = []
    results: dict[str, CopyCheck] = {}
    for entry in entries:
        dest = root / entry.name
        if dest.exists():
            check = check_copy(entry, dest)
            if check.ok:
                results[entry.name] = CopyCheck(entry.name, str(dest), "ok", check.rows, check.identical_files,
                                                "already there, verified")
                continue
            if claim is not None:
                claim(dest, lambda path, entry=entry: is_fetched_copy(path, entry))
            if not force:
                raise DataFetchError(f"{dest} exists and does not verify ({check.detail or check.status}); "
                                     "remove it, or pass --force to replace it")
        todo.append(entry)
    if todo:
        if source == "github" and not mirror_base().startswith("file:"):
            check_reachable(f"{mirror_base()}/", "opct data fetch", timeout)
        elif source == "hub" and not hub_offline():
            check_reachable(hub_endpoint(), "opct data fetch --from hub", timeout)
        root.mkdir(parents=True, exist_ok=True)
        for entry in todo:
            results[entry.name] = _fetch_one(entry, root, source, timeout)
    return [results[e.name] for e in entries]


def _entries(names: Iterable[str]) -> list[PinnedDataset]:
    names = list(names)
    return [pinned(n) for n in names] if names else list(PINNED.values())


def _fetch_one(entry: PinnedDataset, root: Path, source: str, timeout: float) -> CopyCheck:
    dest = root / entry.name
    tmp = root / f".{entry.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        if source == "github":
            for f in entry.files:
                _download(f"{mirror_base()}/{entry.repo}/{entry.commit}/{entry.folder}/{f.name}", tmp / f.name,
                          f.sha256, timeout)
        else:
            spec = HubSpec(entry.upstream, entry.upstream_config, entry.upstream_revision, entry.upstream_split)
            load_hub(spec, timeout).save_to_disk(str(tmp))
        check = check_copy(entry, tmp)
        if not check.ok:
            raise DataFetchError(f"{entry.name}: the download does not verify ({check.detail or check.status}); "
                                 "the source may have changed: nothing was written")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return CopyCheck(entry.name, str(dest), "ok", check.rows, check.identical_files, f"fetched from {source}")


def _download(url: str, target: Path, sha256: str, timeout: float) -> None:
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(target, "wb") as out:
            for block in iter(lambda: response.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
    except OSError as exc:  # URLError, HTTPError, timeouts and refused connections are all OSErrors
        raise DataFetchError(f"downloading {url} failed: {getattr(exc, 'reason', None) or exc}") from None
    if digest.hexdigest() != sha256:
        raise DataFetchError(f"{url}: sha256 {digest.hexdigest()} is not the pinned {sha256}; nothing was written")


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
