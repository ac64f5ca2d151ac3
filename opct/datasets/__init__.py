"""Benchmark loaders that turn files into :class:`EvalItem` lists (one module per format)."""

from opct.datasets.base import (
    DatasetFormatError,
    EvalItem,
    read_eval_items,
    shared_data_dir,
    user_message,
    write_eval_items,
)
from opct.datasets.ifeval import load_ifeval
from opct.datasets.math500 import load_math500
from opct.datasets.multiple_choice import format_mc_prompt, load_gpqa_diamond, load_multiple_choice

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
