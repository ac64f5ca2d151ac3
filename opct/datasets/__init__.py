"""Benchmark loaders that turn data into :class:`EvalItem` lists (one module per benchmark or format).

Every loader reads a local JSONL / Parquet / CSV / JSON file, a ``save_to_disk`` folder or a hub id
with a revision (:mod:`opct.datasets.sources`); :mod:`opct.datasets.catalog` pins the copies opct
uses and :mod:`opct.datasets.fetch` downloads and checks them (``opct data fetch`` / ``verify``).
"""

from opct.datasets.base import (
    DatasetFormatError,
    EvalItem,
    read_eval_items,
    shared_data_dir,
    user_message,
    write_eval_items,
)
from opct.datasets.diamond import load_gpqa_diamond
from opct.datasets.ifeval import load_ifeval
from opct.datasets.math500 import load_math500
from opct.datasets.multiple_choice import format_mc_prompt, load_multiple_choice

__all__ = [
    "DatasetFormatError",
    "EvalItem",
    "format_mc_prompt",
    "load_gpqa_diamond",
    "load_ifeval",
    "load_math500",
    "load_multiple_choice",
    "read_eval_items",
    "shared_data_dir",
    "user_message",
    "write_eval_items",
]
