"""``final/``: the trained model, written atomically, loadable with ``from_pretrained``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from opct.config import RunConfig
from opct.runs.checkpoint import write_failure, writing
from opct.runs.layout import RunLayout, layout_of
from opct.runs.model_card import loadable_base, write_final_files


def save_final(
    acc: Accelerator, model: torch.nn.Module, tokenizer: Any, cfg: RunConfig, run: RunLayout | Path,
    identity: dict[str, Any],
) -> Path:
    """Write ``final/`` atomically: weights (the adapter under LoRA), tokenizer, ``opct_checkpoint.json``
    and the model card (:mod:`opct.runs.model_card`; ``identity``: ``base_weights``, ``data_hash``, ``num_pairs``).

    An adapter's ``adapter_config.json`` names its base as :func:`~opct.runs.model_card.loadable_base` does (an
    alias's folder, a local base by its absolute path), so PEFT's and transformers' adapter loaders find
    the base from any working directory. A write that fails (a full disk) removes ``final.tmp`` and leaves
    an earlier ``final/`` as it was (:class:`~opct.runs.errors.CheckpointWriteError`)."""
    layout = layout_of(run)
    final, tmp = layout.final, layout.final_tmp
    acc.wait_for_everyone()
    state = acc.get_state_dict(model)
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        unwrapped = acc.unwrap_model(model)
        for adapter in getattr(unwrapped, "peft_config", {}).values():
            adapter.base_model_name_or_path = loadable_base(cfg.model.name_or_path)
        try:
            with writing(tmp):
                unwrapped.save_pretrained(tmp, state_dict=state)
                tokenizer.save_pretrained(tmp)
                write_final_files(tmp, cfg, **identity)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)
            if not isinstance(err, OSError):
                raise
            kept = "the run's checkpoints are intact" + (f" and so is the earlier {final}" if final.exists() else "")
            raise write_failure(err, str(final), kept) from err
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    acc.wait_for_everyone()
    return final
