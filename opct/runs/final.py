"""``final/``: the trained model, written atomically, loadable with ``from_pretrained``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from opct.config import MODEL_ALIASES, RunConfig
from opct.errors import read_json
from opct.runs.checkpoint import write_failure, writing
from opct.runs.layout import RunLayout, layout_of
from opct.runs.model_card import loadable_base, write_final_files

ADAPTER_CONFIG = "adapter_config.json"


def save_final(
    acc: Accelerator, model: torch.nn.Module, tokenizer: Any, cfg: RunConfig, run: RunLayout | Path,
    identity: dict[str, Any],
) -> Path:
    """Write ``final/`` atomically: weights (the adapter under LoRA), tokenizer, ``opct_checkpoint.json``
    and the model card (:mod:`opct.runs.model_card`; ``identity``: ``base_weights``, ``data_hash``, ``num_pairs``).

    An adapter's ``adapter_config.json`` names its base as :func:`~opct.runs.model_card.loadable_base` does (a
    hub id as is, an alias such as ``organism`` by its name, which opct resolves on any machine, a local
    base by its absolute path), never a folder inside the installed package; the base weights' sha256 in
    ``opct_checkpoint.json`` refuses another base under the same name (PEFT saves with the alias's local
    folder, so its vocabulary check never asks the hub, and the name is written after). A write that fails (a full disk) removes ``final.tmp`` and leaves
    an earlier ``final/`` as it was (:class:`~opct.runs.errors.CheckpointWriteError`)."""
    layout = layout_of(run)
    final, tmp = layout.final, layout.final_tmp
    acc.wait_for_everyone()
    state = acc.get_state_dict(model)
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        unwrapped = acc.unwrap_model(model)
        adapters = getattr(unwrapped, "peft_config", {})
        for adapter in adapters.values():
            adapter.base_model_name_or_path = _local_base(cfg.model.name_or_path)
        try:
            with writing(tmp):
                unwrapped.save_pretrained(tmp, state_dict=state)
                if adapters:
                    _name_base(tmp, loadable_base(cfg.model.name_or_path))
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


def _local_base(name_or_path: str) -> str:
    """The base as PEFT finds it on this machine while saving: an alias's folder, else the base's identity."""
    if name_or_path in MODEL_ALIASES:
        return str(Path(MODEL_ALIASES.get(name_or_path)()).resolve())
    return loadable_base(name_or_path)


def _name_base(folder: Path, base: str) -> None:
    """Write ``base`` as the base of every adapter config saved in ``folder`` (the default adapter's and
    any named adapter's subfolder)."""
    for config in [folder / ADAPTER_CONFIG, *folder.glob(f"*/{ADAPTER_CONFIG}")]:
        if config.is_file():
            data = read_json(config, "save the adapter again (rerun the command)")
            data["base_model_name_or_path"] = base
            config.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
