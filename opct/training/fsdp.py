"""Fully sharded training (FSDP2, through accelerate): what opct does differently when the weights are sharded.

Launch with ``accelerate launch --use_fsdp --fsdp_version 2 ...`` or an accelerate config with
``distributed_type: FSDP`` and ``fsdp_version: 2`` (docs/training.md, "Several processes"). Then:

* **the policy** is sharded by accelerate's FSDP2 preparation (``fully_shard`` per wrapped unit, the
  embeddings and head, then the root): each process holds about ``1/N`` of every weight;
* **the teacher** is never a full copy per process: under LoRA it *is* the sharded policy with its
  adapter disabled; under full fine-tuning the run-start weights are sharded a second time, from rank
  0's loaded tensors, by :func:`shard_frozen` (no gradients, eval mode, freed again after each unit's
  forward);
* **loading**: only rank 0 reads the weights; the other ranks build the model on the meta device and
  receive their shards (:mod:`opct.training.sharded_loading`);
* **generation** (rollouts, BCT targets) runs inside :func:`gathered`: every FSDP unit is all-gathered
  once before decoding and freed after, so the token-by-token forwards make no collective call and
  processes may decode different numbers of tokens. The full policy (or teacher) is held only for
  the duration of the sampling call. FSDP2's public API only (``unshard``, ``reshard``,
  ``set_reshard_after_forward``; no private attribute of torch, whose internals differ between
  releases: the 2026-11-28 H100 check failed on one);
* **scoring** makes exactly one forward per microbatch on every process (prefix sharing, which may
  make one or two depending on the batch, is off), so every unit's all-gather happens in step, and
  the processes must have as many microbatches as each other (``opct.training.loop`` checks it);
* **checkpoints** gather the trainable parameters and the optimizer state whole on the main process
  (:func:`gather_train_state`) and write the same files a one-process run writes
  (:mod:`opct.runs.checkpoint`); a resume reads them on every process and shards them back
  (:func:`load_full_params`, :func:`load_full_optimizer`). ``final/`` is written from the full state
  dict gathered on the main process, a normal ``from_pretrained`` folder.

On CPU, accelerate (1.15) enables FSDP only on GPU-like devices: ``accelerate launch --use_fsdp``
there starts gloo processes and silently trains with DDP. :func:`enable_cpu_fsdp` turns that request
into FSDP2 over gloo, setting the state accelerate itself sets on a GPU; this is how opct's tests
run FSDP. DeepSpeed is refused (:func:`check_distribution` says why).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import DistributedType
from torch.distributed.fsdp import FSDPModule

from opct.errors import DistributionError


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "false").lower() in ("1", "true", "yes")


def is_fsdp(acc: Accelerator) -> bool:
    """Whether the model is (to be) sharded with FSDP."""
    return acc.distributed_type == DistributedType.FSDP


def enable_cpu_fsdp(acc: Accelerator) -> bool:
    """Make a CPU run launched with FSDP (``ACCELERATE_USE_FSDP``) really use FSDP2 over gloo.

    accelerate sets ``DistributedType.FSDP`` only for GPU-like devices and otherwise keeps the
    ``MULTI_CPU`` (DDP) type it started with. This sets what it sets on a GPU: the plugin (read from
    the ``FSDP_*`` variables ``accelerate launch`` exports), its mixed precision, and the FSDP type
    in both the accelerator's and the process state. Returns whether it did.
    """
    if acc.distributed_type != DistributedType.MULTI_CPU or not _env_flag("ACCELERATE_USE_FSDP"):
        return False
    from accelerate.utils import FullyShardedDataParallelPlugin

    plugin = FullyShardedDataParallelPlugin()
    if plugin.fsdp_version != 2:
        raise DistributionError(
            f"opct trains under FSDP version 2 only (this launch asks for version {plugin.fsdp_version}); "
            "launch with --fsdp_version 2 or set fsdp_version: 2 in the accelerate config"
        )
    if acc.mixed_precision != "no":
        plugin.set_mixed_precision(acc.mixed_precision)
    acc.state.fsdp_plugin = plugin
    acc.state.distributed_type = DistributedType.FSDP
    PartialState().distributed_type = DistributedType.FSDP  # a borg: this sets the process state every instance shares
    return True


_NO_DEEPSPEED = (
    "opct does not train under DeepSpeed: ZeRO keeps the optimizer state (and at stage 3 the weights) in "
    "DeepSpeed's own partitions, which opct's checkpoints, sharded teacher and generation do not read; this "
    "was not built because it could not be verified (accelerate runs DeepSpeed on GPUs only). Launch with "
    "FSDP2 instead (accelerate launch --use_fsdp --fsdp_version 2) or with DDP (--multi_gpu)."
)


def refuse_deepspeed() -> None:
    """Refuse a DeepSpeed launch (``ACCELERATE_USE_DEEPSPEED``) before accelerate starts: without
    DeepSpeed installed accelerate would ask to install it, and on CPU it would train with DDP instead."""
    if _env_flag("ACCELERATE_USE_DEEPSPEED"):
        raise DistributionError(_NO_DEEPSPEED)


def check_distribution(acc: Accelerator) -> None:
    """Refuse a distributed setup opct does not train under, saying why and what to use instead.

    Accepted: one process, DDP, and FSDP version 2 (``fsdp_cpu_ram_efficient_loading`` either way: opct
    always loads the weights on rank 0 only, :mod:`opct.training.sharded_loading`).
    """
    if acc.distributed_type == DistributedType.DEEPSPEED:
        raise DistributionError(_NO_DEEPSPEED)
    refuse_deepspeed()
    if acc.distributed_type == DistributedType.MEGATRON_LM:
        raise DistributionError("opct does not train under Megatron-LM; launch with FSDP2 (--use_fsdp --fsdp_version 2) or DDP")
    if not is_fsdp(acc):
        return
    plugin = acc.state.fsdp_plugin
    if plugin.fsdp_version != 2:
        raise DistributionError(
            f"opct trains under FSDP version 2 only (this run uses version {plugin.fsdp_version}); set "
            "fsdp_version: 2 in the accelerate config or launch with --fsdp_version 2"
        )


def shard_frozen(acc: Accelerator, module: torch.nn.Module) -> torch.nn.Module:
    """Shard a frozen module (the full fine-tuning teacher) as accelerate shards the policy.

    Every unit, the root included, frees its gathered weights after its forward: a frozen module has
    no backward to keep them for.
    """
    from accelerate.utils import fsdp2_prepare_model

    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    sharded = fsdp2_prepare_model(acc, module)
    record_resharding(sharded, True, keep_root_and_head=False)
    return sharded


def _fsdp_modules(module: torch.nn.Module) -> list[FSDPModule]:
    return [m for m in module.modules() if isinstance(m, FSDPModule)]


#: How each sharded module's units reshard after a forward outside :func:`gathered`, as (unit, setting) pairs
#: applied in order. torch has a setter, ``FSDPModule.set_reshard_after_forward``, but no getter: opct
#: records what it configured.
_RESHARDING: weakref.WeakKeyDictionary[torch.nn.Module, list[tuple[FSDPModule, bool]]] = weakref.WeakKeyDictionary()


def record_resharding(module: torch.nn.Module, reshard_after_forward: bool, keep_root_and_head: bool) -> None:
    """Set how ``module``'s FSDP units reshard after a forward, and record it for :func:`gathered` to restore.

    Every unit reshards as ``reshard_after_forward`` says; with ``keep_root_and_head`` the root and the unit
    of the output embeddings keep their weights, as accelerate's FSDP2 layout has them (the root left to
    torch's default, which does not reshard it; the final norm and the head one unit that does not
    reshard): both are needed again at the start of the backward. Set last, the head's setting is its
    whole unit's (the final norm shares it).
    """
    units = _fsdp_modules(module)
    plan = [(unit, reshard_after_forward) for unit in units]
    if keep_root_and_head and units:
        head = getattr(module, "get_output_embeddings", lambda: None)()
        plan += [(unit, False) for unit in units if unit is units[0] or unit is head]
    for unit, setting in plan:
        unit.set_reshard_after_forward(setting, recurse=False)
    _RESHARDING[module] = plan


@contextmanager
def gathered(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Hold every FSDP unit of ``module`` gathered (unsharded) inside the block, for generation.

    FSDP2's public API only: every unit is told not to reshard after a forward
    (``set_reshard_after_forward(False)``) and gathered (``unshard()``); on leaving, each is resharded
    (``reshard()``) and its resharding after a forward set back to what :func:`record_resharding` recorded
    (every unit resharding, when nothing was recorded). Entering and leaving are collective (every
    process must do both); in between, forwards make no collective call, so processes may run different
    numbers of them. A module without FSDP units passes through unchanged. Use under ``torch.no_grad``.
    """
    units = _fsdp_modules(module)
    if not units:
        yield module
        return
    plan = _RESHARDING.get(module) or [(unit, True) for unit in units]
    for unit in units:
        unit.set_reshard_after_forward(False, recurse=False)
    try:
        for unit in units:
            unit.unshard()
        yield module
    finally:
        for unit in units:
            unit.reshard()
        for unit, reshard_after_forward in plan:
            unit.set_reshard_after_forward(reshard_after_forward, recurse=False)


def held_elements(*modules: torch.nn.Module) -> int:
    """Parameter elements this process holds for ``modules`` (its shards under FSDP), each storage once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for module in modules:
        for p in module.parameters():
            local = p.to_local() if hasattr(p, "to_local") else p
            key = (local.data_ptr(), local.numel())
            if key not in seen:
                seen.add(key)
                total += local.numel()
    return total


def layout(acc: Accelerator, policy: torch.nn.Module, teacher: torch.nn.Module, shares_weights: bool) -> dict[str, Any]:
    """What each process holds after sharding (collective; recorded in the run's manifest)."""
    from accelerate.utils import gather_object

    local = [{"policy": held_elements(policy), "teacher": held_elements(teacher), "both": held_elements(policy, teacher)}]
    per_process = gather_object(local)
    return {
        "version": 2,
        "teacher": "policy_without_adapter" if shares_weights else "sharded_copy",
        "policy_elements": sum(p.numel() for p in policy.parameters()),
        "policy_elements_held": [r["policy"] for r in per_process],
        "teacher_elements_held": [r["teacher"] for r in per_process],
        "elements_held": [r["both"] for r in per_process],
    }


def check_microbatch_count(acc: Accelerator, count: int) -> None:
    """Under FSDP every forward and backward is collective: stop, rather than hang, when processes differ."""
    counts = acc.gather(torch.tensor([count], device=acc.device)).tolist()
    if len(set(counts)) > 1:
        raise RuntimeError(
            f"under FSDP every process must run as many microbatches as the others, but they have {counts}; "
            "the method must give each process's share of a step the same number of microbatches"
        )


def _raw(optimizer: Any) -> torch.optim.Optimizer:
    return getattr(optimizer, "optimizer", optimizer)


def gather_train_state(model: torch.nn.Module, optimizer: Any) -> tuple[dict[str, torch.Tensor], list[str], dict[str, Any]] | None:
    """Gather the trainable parameters and the optimizer state whole on the main process (collective).

    Returns, on the main process, ``(parameters by name, the optimizer's parameter names in order,
    its state dict in torch's own layout: ``state`` keyed by position, ``param_groups`` of positions)``;
    None on the others.
    """
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=True)
    params = get_model_state_dict(model, options=options)
    optim = get_optimizer_state_dict(model, _raw(optimizer), options=options)
    if torch.distributed.get_rank() != 0:
        return None
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    params = {name: tensor for name, tensor in params.items() if name in trainable}  # no buffers
    order = [name for group in optim["param_groups"] for name in group["params"]]
    index = {name: i for i, name in enumerate(order)}
    groups = [{**group, "params": [index[n] for n in group["params"]]} for group in optim["param_groups"]]
    state = {index[name]: values for name, values in optim["state"].items()}
    return params, order, {"state": state, "param_groups": groups}


def load_full_params(model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Load whole tensors (each process holds them all) into the sharded trainable parameters."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    set_model_state_dict(model, tensors, options=StateDictOptions(full_state_dict=True, strict=False))


def load_full_optimizer(
    model: torch.nn.Module, optimizer: Any, order: list[str], state: dict[int, dict[str, Any]], groups: list[dict[str, Any]]
) -> None:
    """Load a whole optimizer state in torch's layout (positions, names in ``order``) into a sharded optimizer."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    named = {
        "state": {order[i]: values for i, values in state.items()},
        "param_groups": [{**group, "params": [order[i] for i in group["params"]]} for group in groups],
    }
    set_optimizer_state_dict(model, _raw(optimizer), named, options=StateDictOptions(full_state_dict=True))
