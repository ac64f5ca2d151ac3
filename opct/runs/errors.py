"""The errors and the warning of a run directory, and of a trained model folder loaded from one."""

from __future__ import annotations

from opct.errors import FAULT, OpctError


class RunDirError(OpctError, RuntimeError):
    """The run directory cannot be used as asked (different config, different teacher...)."""


class CheckpointError(RunDirError):
    """A checkpoint cannot be resumed from: damaged, or not written for this model and optimizer."""

    exit_code = FAULT


class CheckpointWriteError(RunDirError):
    """A checkpoint or ``final/`` could not be written (a full disk...); nothing half-written was kept."""

    exit_code = FAULT


class RunLockedError(RunDirError):
    """Another process is training in the run directory."""


class RunDirWarning(UserWarning):
    """Part of a run directory was damaged and skipped or cut back (a checkpoint, a log's tail)."""


class ModelCheckpointError(OpctError, ValueError):
    """A trained model folder (``final/`` or an export) that cannot be loaded as asked: an unreadable
    record, tensors that are not the model's, a base whose weights changed. ``opct.models`` knows it
    as ``CheckpointError``."""


class RemoteCodeNotAllowedError(ModelCheckpointError):
    """A trained model folder that records ``trust_remote_code: true`` loaded by a command that did not
    allow remote code: only the command line (or the user's own config file) may turn it on."""
