"""Consistency pairs: the one data contract between data and training.

One idea per module: the pair itself (:mod:`opct.pairs.contract`), checking records against it
(:mod:`opct.pairs.validation`), pair files and datasets (:mod:`opct.pairs.files`), the registered pair
sources (:mod:`opct.pairs.sources`), split names (:mod:`opct.pairs.splits`), a summary of a pair set
(:mod:`opct.pairs.summary`) and TRL's SDFT rows, whose teacher prompt is built (:mod:`opct.pairs.trl_sdft`).
Their public names are importable from here.
"""

from opct.pairs.contract import DEFAULT_COLUMNS, DERIVED_ID_PREFIX, REQUIRED, ROLES, ConsistencyPair, Message
from opct.pairs.files import read_pairs, write_pairs
from opct.pairs.sources import PAIR_SOURCES, PairSource, load_pair_source
from opct.pairs.splits import (
    is_family_validation_split,
    is_heldout_split,
    is_train_split,
    is_validation_split,
)
from opct.pairs.summary import PairSummary, summarize_pairs
from opct.pairs.trl_sdft import TeacherPromptBuiltWarning, sdft_teacher_prompt
from opct.pairs.validation import (
    DerivedPairIdWarning,
    PairFileError,
    PairProblem,
    check_messages,
    derived_pair_id,
    pair_from_record,
    pairs_from_records,
)

__all__ = [
    "DEFAULT_COLUMNS",
    "DERIVED_ID_PREFIX",
    "PAIR_SOURCES",
    "REQUIRED",
    "ROLES",
    "ConsistencyPair",
    "DerivedPairIdWarning",
    "Message",
    "PairFileError",
    "PairProblem",
    "PairSource",
    "PairSummary",
    "TeacherPromptBuiltWarning",
    "check_messages",
    "derived_pair_id",
    "is_family_validation_split",
    "is_heldout_split",
    "is_train_split",
    "is_validation_split",
    "load_pair_source",
    "pair_from_record",
    "pairs_from_records",
    "read_pairs",
    "sdft_teacher_prompt",
    "summarize_pairs",
    "write_pairs",
]
