"""The errors and the warning of a run directory."""

from __future__ import annotations

from opct.errors import FAULT, OpctError


class RunDirError(OpctError, RuntimeError):
    """The run directory cannot be used as asked (different config, different teacher...)."""


class CheckpointError(RunDirError):
    """A checkpoint cannot be resumed from: damaged, or not written for this model and optimizer."""

    exit_code = FAULT


class RunLockedError(RunDirError):
    """Another process is training in the run directory."""


class RunDirWarning(UserWarning):
    """Part of a run directory was damaged and skipped or cut back (a checkpoint, a log's tail)."""
