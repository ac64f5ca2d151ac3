"""Loading a run's policy and teacher under FSDP2: only rank 0 reads the weights, the others receive their shards.

Without this every process would read the whole model from disk into host RAM, and under full
fine-tuning deep-copy it again for the teacher: two models per process before any sharding.
:func:`load_sharded` instead

* reads the weights on rank 0 only (:func:`opct.models.load_model`) and fingerprints them there; the
  fingerprint and the dtype are broadcast;
* builds the same model on the other ranks from its ``config.json`` with its parameters on the meta
  device (:func:`empty_model`: no storage, and the weights file is never opened; buffers such as rotary
  frequencies are computed as usual);
* shards the policy with accelerate's FSDP2 preparation with ``cpu_ram_efficient_loading`` on: rank 0
  broadcasts each full tensor and every rank keeps its shard (accelerate's ``fsdp2_load_full_state_dict``);
* under full fine-tuning shards the frozen teacher the same way, from rank 0's loaded tensors (a module
  whose parameters *are* those tensors, not a copy of them), before the policy is sharded: no process
  ever holds a second full model.

The policy comes back already sharded, so its optimizer is built on the shards
(``accelerate.prepare`` then leaves the model as it is). Measured with two gloo processes:
``benchmarks/fsdp_loading_memory.py`` (results in ``benchmarks/results/fsdp-loading-memory-*.json``).
"""

from __future__ import annotations

import os
from contextlib import suppress
from typing import Any

import torch
from accelerate import Accelerator, init_empty_weights
from accelerate.utils import broadcast_object_list, fsdp2_prepare_model
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

from opct.config import ModelConfig, RunConfig
from opct.models import (
    Teacher,
    add_lora,
    disable_dropout,
    load_model,
    make_teacher,
    resolve_model_path,
    weights_sha256,
)
from opct.training import fsdp

#: What accelerate exports for ``fsdp_cpu_ram_efficient_loading`` and transformers reads in ``from_pretrained``.
_RAM_EFFICIENT_ENV = "FSDP_CPU_RAM_EFFICIENT_LOADING"


def empty_model(spec: ModelConfig, dtype: torch.dtype) -> torch.nn.Module:
    """``spec``'s model with its parameters on the meta device (no storage; its weights file unread).

    Built from the folder's ``config.json`` (and ``generation_config.json``, so its end-of-sequence ids are
    those :func:`opct.models.load_model` would give) in ``dtype``; buffers that are not saved with the
    weights (rotary frequencies) are computed on the CPU as in a normal load. In eval mode, as
    ``from_pretrained`` leaves a model.
    """
    path = resolve_model_path(spec.name_or_path)
    config = AutoConfig.from_pretrained(path, revision=spec.revision, trust_remote_code=spec.trust_remote_code)
    kwargs: dict[str, Any] = {"dtype": dtype, "trust_remote_code": spec.trust_remote_code}
    if spec.attn_implementation:
        kwargs["attn_implementation"] = spec.attn_implementation
    with init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(config, **kwargs)
    with suppress(OSError):  # no generation_config.json: from_pretrained derives it from the config, as from_config did
        model.generation_config = GenerationConfig.from_pretrained(path, revision=spec.revision)
    model.eval()
    return model


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.removeprefix("torch."))


def load_sharded(acc: Accelerator, cfg: RunConfig) -> tuple[torch.nn.Module, Teacher, str]:
    """The run's policy (LoRA added, dropout off as configured) and frozen teacher, both sharded, with the
    sha256 of the base weights (:func:`opct.models.weights_sha256`); only rank 0 reads the weights (collective).

    Under LoRA the teacher is the sharded policy itself with its adapter disabled; under full
    fine-tuning it is sharded from rank 0's loaded tensors without a copy (:func:`opct.training.fsdp.shard_frozen`).
    """
    plugin = acc.state.fsdp_plugin
    plugin.cpu_ram_efficient_loading = True  # rank 0 broadcasts what it read; the others hold meta parameters
    # With this variable true (fsdp_cpu_ram_efficient_loading: true) transformers' from_pretrained gives ranks > 0
    # an unloaded model; opct's own rank-0 loading is above, and any other model a process loads (a judge, a
    # probe) must be loaded whole.
    os.environ[_RAM_EFFICIENT_ENV] = "false"
    main = acc.is_main_process
    loaded = load_model(cfg.model) if main else None
    sent = [weights_sha256(loaded), str(next(loaded.parameters()).dtype)] if loaded is not None else [None, None]
    base_weights, dtype = broadcast_object_list(sent, from_process=0)
    model = loaded if loaded is not None else empty_model(cfg.model, _dtype(dtype))
    if cfg.train.disable_dropout:
        disable_dropout(model)
    if cfg.finetune == "lora":
        model = add_lora(model, cfg.lora)
        teacher = make_teacher(model, fingerprint=base_weights[:16])
    else:
        frozen = empty_model(cfg.model, _dtype(dtype))
        if loaded is not None:  # rank 0's tensors themselves (assign): what accelerate broadcasts, no copy
            frozen.load_state_dict(loaded.state_dict(), assign=True)
        if cfg.train.disable_dropout:
            disable_dropout(frozen)
        teacher = Teacher(model=fsdp.shard_frozen(acc, frozen), shares_weights=False, fingerprint=base_weights[:16])
        del frozen
    policy = fsdp2_prepare_model(acc, model)
    fsdp.record_resharding(policy, plugin.reshard_after_forward is not False, keep_root_and_head=True)
    if teacher.shares_weights:
        teacher.model = policy
    return policy, teacher, base_weights
