"""Split names in any spelling: train, validation, family validation, held-out."""

from __future__ import annotations

import re


def _split_key(name: str) -> str:
    """A split name without case, spaces or punctuation: ``Held-Out`` -> ``heldout``."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def is_heldout_split(name: str) -> bool:
    """Whether ``name`` is the held-out split in any spelling (``heldout``, ``held-out``, ``HeldOut``,
    ``held_out``, ``holdout``): held-out data is for the final evaluation, never for training."""
    return _split_key(name) in {"heldout", "holdout"}


def is_train_split(name: str) -> bool:
    """Whether ``name`` is the training split in any spelling (``train``, ``Train``, ``training``)."""
    return _split_key(name) in {"train", "training"}


def is_family_validation_split(name: str) -> bool:
    """Whether ``name`` is the family validation split (``famval``, ``family-validation``): whole
    perturbation families held back from training to measure transfer to unseen perturbations."""
    return _split_key(name) in {"famval", "familyvalidation"}


def is_validation_split(name: str) -> bool:
    """Whether ``name`` is a validation split in any spelling (``val``, ``Val``, ``validation``, and the
    family validation split :func:`is_family_validation_split`): never trained on."""
    return _split_key(name) in {"val", "validation"} or is_family_validation_split(name)

