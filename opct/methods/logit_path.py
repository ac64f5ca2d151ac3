"""Whether a microbatch's logits are built whole or taken from the final hidden states in chunks, and how
many positions a chunk holds: the rule :func:`opct.methods.base.score_pair` follows."""

from __future__ import annotations

from opct.config import TrainConfig
from opct.models import Teacher
from opct.sampling.hidden_logits import OutputHead, hidden_scoring
from opct.sampling.logit_rows import positions_fitting


def positions_within(train: TrainConfig, vocab: int) -> int:
    """How many positions' float32 logits over ``vocab`` tokens fit in ``train.whole_logits_max_mib``."""
    return positions_fitting(train.whole_logits_max_mib, vocab)


def logits_chunk_positions(train: TrainConfig, vocab: int) -> int:
    """Positions per chunk of logits taken from hidden states: ``train.logprob_chunk_positions``, fewer where
    that many would not fit in ``train.whole_logits_max_mib`` (at least one)."""
    return max(1, min(train.logprob_chunk_positions, positions_within(train, vocab)))


def chunked_heads(
    train: TrainConfig,
    policy: object,
    teacher: Teacher | None,
    positions: int,
    pad_id: int,
    sharded: bool = False,
) -> tuple[OutputHead, OutputHead | None] | None:
    """The policy's and the ``teacher``'s output heads when ``positions`` completion positions (sequences x
    longest completion) are to be scored from hidden states in chunks, else ``None`` (logits built whole).

    The rule: chunks when the whole logits (``positions x vocabulary`` float32) would exceed
    ``train.whole_logits_max_mib``, the weights are not sharded (FSDP), and both models pass their
    self-check (:func:`opct.sampling.hidden_logits.hidden_scoring`; a failure is said once). Below the limit
    the whole logits are small and the path is the one opct always took, to the bit.
    """
    if sharded:
        return None
    vocab = policy.get_output_embeddings().weight.shape[0]
    if positions <= positions_within(train, vocab):
        return None
    student = hidden_scoring(policy, pad_id)
    if student is None or teacher is None:
        return None if student is None else (student, None)
    with teacher.active() as reference:
        reference_head = hidden_scoring(reference, pad_id)
    return None if reference_head is None else (student, reference_head)
