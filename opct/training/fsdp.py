"""Fully sharded training (FSDP2, through accelerate): what opct does differently when the weights are sharded.

Launch with ``accelerate launch --use_fsdp --fsdp_version 2 ...`` or an accelerate config with
``distributed_type: FSDP`` and ``fsdp_version: 2`` (docs/training.md, "Several processes"). Then:

* **the policy** is sharded by accelerate's ``prepare`` (``fully_shard`` per wrapped unit, the
  embeddings and head, then the root): each process holds about ``1/N`` of every weight;
* **the teacher** is never a full copy per process: under LoRA it *is* the sharded policy with its
  adapter disabled; under full fine-tuning the run-start copy is sharded the same way by
  :func:`shard_frozen` (no gradients, eval mode, freed again after each unit's forward);
* **generation** (rollouts, BCT targets) runs inside :func:`gathered`: every FSDP unit is all-gathered
  once before decoding and freed after, so the token-by-token forwards make no collective call and
  processes may decode different numbers of tokens. The full policy (or teacher) is held only for
  the duration of the sampling call;
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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import DistributedType

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
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
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

    Accepted: one process, DDP, and FSDP version 2 (without ``cpu_ram_efficient_loading``).
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
    if plugin.cpu_ram_efficient_loading:
        raise DistributionError(
            "fsdp_cpu_ram_efficient_loading is not supported: opct fingerprints the base weights and copies the "
            "teacher on every process, which needs the weights loaded there; set fsdp_cpu_ram_efficient_loading: false"
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
    sharded.set_reshard_after_forward(True)
    return sharded


def _fsdp_modules(module: torch.nn.Module) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in module.modules() if isinstance(m, FSDPModule)]


def param_groups(state: Any) -> list[Any]:
    """The parameter groups of one FSDP unit's state (torch's private ``FSDPState``).

    torch 2.13 keeps them in ``_fsdp_param_groups`` (a list: several meshes per unit) and torch 2.11 in
    ``_fsdp_param_group`` (one group or None; reading only the list fails there, the torch of the
    2026-11-28 H100 check); both are read, so :func:`gathered` works on either. Anything else is an
    error naming what was found, not an ``AttributeError`` deep in a rollout.
    """
    if hasattr(state, "_fsdp_param_groups"):
        return list(state._fsdp_param_groups)
    if hasattr(state, "_fsdp_param_group"):
        group = state._fsdp_param_group
        return [] if group is None else [group]
    raise RuntimeError(
        f"this torch ({torch.__version__}) keeps FSDP2's parameter groups where opct does not look "
        "(neither _fsdp_param_groups nor _fsdp_param_group on the unit's state): opct.training.fsdp.gathered "
        "needs updating for it"
    )


@contextmanager
def gathered(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Hold every FSDP unit of ``module`` gathered (unsharded) inside the block, for generation.

    Entering and leaving are collective (every process must do both); in between, forwards make no
    collective call, so processes may run different numbers of them. A module without FSDP units
    passes through unchanged. Use under ``torch.no_grad``.
    """
    units = _fsdp_modules(module)
    if not units:
        yield module
        return
    units[0]._get_fsdp_state()._lazy_init()  # settle the root's own resharding before it is saved
    saved = []
    for unit in units:
        for group in param_groups(unit._get_fsdp_state()):
            saved.append((group, group.post_forward_mesh_info))
            group.post_forward_mesh_info = None  # no resharding after a forward
    try:
        for unit in units:
            unit.unshard()
        yield module
    finally:
        for group, info in saved:
            group.post_forward_mesh_info = info
        for unit in units:
            unit.reshard()


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
