"""Who owns an output folder, so that no opct command writes into, replaces or deletes another's.

Every folder an opct command writes says what it is: a ``manifest.json`` with its ``kind`` (``train``
for a training run, ``eval``, ``attack``, ``experiment``, ``study``, ``selection``; an eval's and an
attack's also name the weights they measured, ``weights_sha256``), or an ``opct_checkpoint.json``
(a run's ``final/``; an ``opct export`` folder has ``merged_from`` in it). :func:`output_owner` reads
that; :func:`check_output` refuses a folder that belongs to something else, or that lies inside a
trained checkpoint, an eval, an attack or the folders training rewrites (naming what it belongs to);
:func:`output_lock` keeps a second writer out of a folder while one works (an ``flock`` on its
``.lock``, as training's: :mod:`opct.runs.lock`).

:func:`claim_output` is the rule of every command that writes a folder or file of its own choosing (``opct
model tiny DIR``, ``opct data fetch --to``, ``opct pairs build --out``): it writes only where nothing is, into
an empty folder, or over its own earlier output; anything else is refused, naming what was found.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opct.errors import OpctError, with_article
from opct.runs.atomic import read_json_object
from opct.runs.layout import CHECKPOINT_FILE, RunLayout
from opct.runs.lock import try_lock

#: The kinds of output nothing else is ever written inside (a run is, beside the folders training
#: rewrites: ``opct export RUN --out RUN/merged``; an experiment's evals, attacks and runs are folders
#: of their own under it).
SEALED = ("checkpoint", "export", "eval", "attack")


class OutputOwnedError(OpctError, ValueError):
    """An output folder that belongs to something else (a run, another model's eval, an attack...)."""


class OutputLockedError(OpctError, RuntimeError):
    """Another process is writing the output folder."""


@dataclass(frozen=True)
class OutputOwner:
    """What an output folder is: its ``kind`` and the record that says so (its manifest or checkpoint record)."""

    kind: str
    folder: Path
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def weights(self) -> str | None:
        """The sha256 of the weights an eval or attack measured (None when it does not say)."""
        value = self.record.get("weights_sha256") or (self.record.get("config") or {}).get("weights_sha256")
        return str(value) if value else None

    @property
    def model(self) -> str | None:
        """The model it was written for, as it was named (None when it does not say)."""
        config = self.record.get("config")
        value = config.get("model") if isinstance(config, dict) else None
        return str(value) if value else None

    def describe(self) -> str:
        """``the training run runs/x``, ``the eval of organism (weights 3f0c...)``, ``an opct export of ...``."""
        if self.kind == "train":
            return f"the training run {self.folder}"
        if self.kind == "checkpoint":
            return f"the trained checkpoint {self.folder}"
        if self.kind == "export":
            return f"an opct export of {self.record.get('exported_from') or self.record.get('merged_from', '?')}"
        if self.kind in ("eval", "attack"):
            weights = f" (weights {self.weights})" if self.weights else ""
            return f"the {self.kind} of {self.model or 'another model'}{weights}"
        if self.kind == "unknown":
            return f"another program's output ({self.folder} has a manifest.json opct did not write)"
        return f"the {self.kind} {self.folder}"


def output_owner(folder: str | Path) -> OutputOwner | None:
    """What ``folder`` is, or None when it is no opct output (absent, empty, or other files only).

    A ``manifest.json`` without a ``kind`` but with ``weights_sha256`` is an eval written before kinds."""
    folder = Path(folder)
    layout = RunLayout(folder)
    if layout.manifest.is_file():
        record = read_json_object(layout.manifest)
        if record is None:
            return OutputOwner("unknown", folder)
        kind = record.get("kind") or ("eval" if record.get("weights_sha256") else "unknown")
        return OutputOwner(str(kind), folder, record)
    if (folder / CHECKPOINT_FILE).is_file():
        record = read_json_object(folder / CHECKPOINT_FILE) or {}
        exported = "merged_from" in record or "exported_from" in record
        return OutputOwner("export" if exported else "checkpoint", folder, record)
    if layout.final_record.is_file() or layout.metrics.is_file():  # a run whose manifest is not written (yet)
        return OutputOwner("train", folder)
    return None


def _rewritten_by_training(layout: RunLayout) -> tuple[Path, ...]:
    """The folders of a run that training replaces or deletes."""
    return layout.final, layout.final_tmp, layout.checkpoints, layout.trackers


def enclosing_owner(folder: str | Path) -> tuple[OutputOwner, str] | None:
    """The output a folder *above* ``folder`` belongs to when writing ``folder`` would write into it:
    ``(owner, why)`` for a folder inside a trained checkpoint, an eval, an attack or an export, or
    inside the parts of a run that training rewrites; None otherwise (a new folder in an experiment,
    beside a run's files, or under a folder opct did not write, is its own)."""
    target = Path(folder).resolve()
    for above in target.parents:
        owner = output_owner(above)
        if owner is None:
            continue
        if owner.kind == "train":
            layout = RunLayout(above)
            for part in _rewritten_by_training(layout):
                if target == part or part in target.parents:
                    return owner, f"it is inside {part}, which training rewrites"
            continue
        if owner.kind in SEALED:
            return owner, f"it is inside {above}"
    return None


def check_output(folder: str | Path, kind: str, flag: str) -> OutputOwner | None:
    """The owner of ``folder`` when it is a ``kind`` output (None for a new or unmarked folder).

    Raises :class:`OutputOwnedError`, naming the owner, when ``folder`` (or a folder above it, see
    :func:`enclosing_owner`) belongs to something else. ``flag`` is the option that named the folder
    (``opct eval --out``), for the message. Whether a ``kind`` output is *this* command's (the same
    weights and settings) is the caller's to check."""
    folder = Path(folder)
    enclosing = enclosing_owner(folder)
    if enclosing is not None:
        owner, why = enclosing
        raise OutputOwnedError(f"{flag} {folder}: {why}, which belongs to {owner.describe()}; writing there would "
                               "change it. Choose a folder of its own.")
    owner = output_owner(folder)
    if owner is not None and owner.kind != kind:
        raise OutputOwnedError(f"{flag} {folder} belongs to {owner.describe()}; {with_article(kind)} never writes into, replaces "
                               "or deletes it. Choose another folder.")
    return owner


def listing(folder: Path, most: int = 4) -> str:
    """The first ``most`` names in ``folder`` (folders with a ``/``), and how many there are in all."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    more = f", ... ({len(names)} in all)" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _manifest_kind(layout: RunLayout) -> str | None:
    """The ``kind`` a run folder's manifest names; None without a manifest, or with one that names none."""
    return (read_json_object(layout.manifest) or {}).get("kind") if layout.manifest.is_file() else None


def _free(path: Path, flag: str) -> bool:
    """Whether ``path`` is free to write: absent, or an empty folder; a symbolic link that leads nowhere is an
    :class:`OutputOwnedError` naming ``flag``."""
    if path.is_symlink() and not path.exists():
        raise OutputOwnedError(f"{flag} {path} is a symbolic link to {os.readlink(path)}, which does not exist; "
                               "give the real path, or a new one")
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def is_training_run(folder: Path) -> bool:
    """Whether ``folder`` is opct's own training run, the only folder ``opct train`` resumes in: its manifest says
    ``train``; or it has no manifest naming another kind (none yet, or a damaged one, which resuming then names)
    and every entry in it is one a run's layout names (:meth:`RunLayout.names`). A folder with any other file
    (a user's notes beside a ``metrics.jsonl``), or another kind of opct output, is not."""
    if not folder.is_dir():
        return False
    layout = RunLayout(folder)
    kind = _manifest_kind(layout)
    return kind == "train" or (kind is None and all(layout.names(p.name) for p in folder.iterdir()))


def claim_run_directory(folder: str | Path) -> None:
    """Refuse to train in ``folder`` unless it is absent, empty or :func:`is_training_run`; the
    :class:`OutputOwnedError` names what is there (another opct output, or the files no run writes), before
    anything is written."""
    folder = Path(folder)
    if _free(folder, "the run directory") or is_training_run(folder):
        return
    layout = RunLayout(folder)
    if not folder.is_dir():
        found = "is a file, not a folder"
    elif _manifest_kind(layout) is not None:
        found = f"holds {output_owner(folder).describe()}, not a training run"
    else:
        foreign = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir() if not layout.names(p.name))
        found = f"holds files opct did not write ({', '.join(foreign[:4])}{', ...' if len(foreign) > 4 else ''})"
    raise OutputOwnedError(f"the run directory {folder} (output_dir/name) {found}; nothing was written, and nothing "
                           "there is ever replaced. Give the run another name (--set name=...) or output_dir, or move "
                           "those files away.")


def claim_output(path: str | Path, flag: str, is_own: Callable[[Path], bool], own_output: str) -> None:
    """Refuse to write ``path`` (a folder or a file) unless it is absent, an empty folder, or ``is_own(path)``:
    the command's own earlier output (``own_output`` says what that is, e.g. ``an earlier opct model tiny``).

    Anything else (a file where a folder goes, a folder of someone else's files, another opct output, a
    symbolic link that leads nowhere) is an :class:`OutputOwnedError` naming ``flag``, the path and what was
    found, before anything is written; nothing there is changed."""
    path = Path(path)
    if _free(path, flag) or is_own(path):
        return
    owner = output_owner(path) if path.is_dir() else None
    if owner is not None:
        found = owner.describe()
    elif path.is_dir():
        found = f"files opct did not write ({listing(path)})"
    else:
        found = "a file opct did not write"
    raise OutputOwnedError(f"{flag} {path} holds {found}, not {own_output}; nothing was written, and nothing there is "
                           "ever replaced. Give a new or empty folder, or move those files away.")


@contextmanager
def output_lock(folder: str | Path, what: str) -> Iterator[None]:
    """Hold ``folder``'s ``.lock`` while ``what`` (``an eval``) writes there; raise :class:`OutputLockedError`
    naming the holder's pid when another process holds it. The kernel drops the lock when its holder
    ends, however it ends."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = RunLayout(folder).lock
    held, holder = try_lock(lock)
    if held is None:
        raise OutputLockedError(f"{folder} is in use by another process ({holder} holds {lock}); two writers would mix "
                                f"their records. Wait for it to end, or give {what} another output folder.")
    try:
        yield
    finally:
        held.release()
