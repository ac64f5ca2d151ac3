"""The frozen run-start policy a run is trained against."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from opct.models.weights import is_peft, weights_fingerprint


@dataclass
class Teacher:
    """The frozen run-start policy.

    Under LoRA it is the same module with the adapter disabled (no second copy of the weights);
    under full fine-tuning it is an immutable copy made before training (under FSDP each process
    keeps only its shard of it: :func:`opct.training.fsdp.shard_frozen`).
    """

    model: torch.nn.Module
    shares_weights: bool
    fingerprint: str

    @contextmanager
    def active(self) -> Iterator[torch.nn.Module]:
        """Yield a module that computes the teacher's outputs (use under ``torch.no_grad``)."""
        was_training = self.model.training
        self.model.eval()
        try:
            if self.shares_weights:
                with self.model.disable_adapter():
                    yield self.model
            else:
                yield self.model
        finally:
            self.model.train(was_training)


def make_teacher(model: torch.nn.Module, fingerprint: str | None = None) -> Teacher:
    """Build the frozen teacher for a policy about to be trained.

    ``fingerprint`` is the base weights' :func:`weights_fingerprint` taken before any adapter was
    added (computed here when not given).
    """
    if is_peft(model):
        return Teacher(model=model, shares_weights=True, fingerprint=fingerprint or weights_fingerprint(model))
    frozen = copy.deepcopy(model)
    frozen.eval()
    for p in frozen.parameters():
        p.requires_grad_(False)
    return Teacher(model=frozen, shares_weights=False, fingerprint=fingerprint or weights_fingerprint(frozen))

