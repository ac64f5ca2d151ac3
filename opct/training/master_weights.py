"""fp32 master weights for training half-precision weights (``optim.master_weights``).

AdamW on bfloat16 weights rounds every update to the weight's own resolution: bfloat16 keeps 8 bits of
mantissa, so a weight of 0.5 moves only by steps of 2^-9 (about 0.002) and any update smaller than
half of that (``lr`` times Adam's normalised gradient, about ``lr`` per step) is lost, step after step.
The usual remedy (DeepSpeed's and apex's "master weights", FSDP's fp32 parameters with a bf16
compute dtype) is to keep an fp32 copy of each trained weight, step the copy, and write it back rounded
to the model's dtype; the small updates then add up in the copy until they move the bf16 weight.

torch has no optimizer that does this for weights stored in half precision, and accelerate does it only
through DeepSpeed or FSDP's mixed precision (weights held in fp32), which opct's checkpoints and
sharded teacher do not go through. :class:`MasterWeightAdamW` is the small wrapper: torch's own AdamW
arithmetic (its functional ``adamw``, the same code ``torch.optim.AdamW`` runs) applied to fp32 copies.
Its state lives in the optimizer's per-parameter state (``master``, ``exp_avg``, ``exp_avg_sq``, all
fp32; ``step``), keyed by the model's own parameters, so opct's checkpoints
(:mod:`opct.runs.checkpoint`, :func:`opct.training.fsdp.gather_train_state`) save the master copy
like any optimizer state and a resume continues bit for bit.

Memory (by arithmetic, per trained parameter): plain AdamW on bf16 weights holds 2 (weight) + 2 (grad)
+ 4 (its two moments, bf16) bytes; with master weights 2 + 2 + 4 (master) + 8 (fp32 moments) = 16 bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from typing import Any, Literal

import torch
from torch.optim.adamw import adamw

from opct.config import OptimConfig

#: Parameter dtypes whose updates round away without an fp32 master copy.
HALF_DTYPES = (torch.bfloat16, torch.float16)
#: The per-parameter state kept in fp32 (a checkpoint restores them exactly, never in the weight's dtype).
FP32_STATE = ("master", "exp_avg", "exp_avg_sq")


class MasterWeightAdamW(torch.optim.Optimizer):
    """AdamW (decoupled weight decay) that steps an fp32 master copy of each half-precision parameter.

    For a bf16 or fp16 parameter ``p`` it keeps ``state[p]["master"]``, an fp32 copy made at the first
    step; each step casts ``p.grad`` up to fp32, runs torch's AdamW update on the master copy with fp32
    moments, and writes the master back into ``p`` rounded to ``p``'s dtype. An fp32 parameter is
    stepped in place, exactly as ``torch.optim.AdamW`` steps it (its own weights are the master).
    ``param_groups`` hold the model's parameters, so learning-rate schedulers and checkpoints see the
    model's parameters, as with AdamW.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ) -> None:
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        """One AdamW step on the master copies, written back into the parameters."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, masters, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    master = p.detach().to(torch.float32).clone() if p.dtype != torch.float32 else p
                    if master is not p:
                        state["master"] = master
                    state["step"] = torch.tensor(0.0, dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(master, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(master, memory_format=torch.preserve_format)
                params.append(p)
                masters.append(state.get("master", p))
                grads.append(p.grad if p.grad.dtype == torch.float32 else p.grad.to(torch.float32))
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
            if not params:
                continue
            beta1, beta2 = group["betas"]
            adamw(
                masters, grads, exp_avgs, exp_avg_sqs, [], steps,
                amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"],
                eps=group["eps"], maximize=False,
            )
            for p, master in zip(params, masters, strict=True):
                if master is not p:
                    p.copy_(master)  # rounded to the parameter's dtype
        return loss

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict, keeping the master copies and moments in fp32.

        ``torch.optim.Optimizer.load_state_dict`` casts every floating-point state tensor to its
        parameter's dtype: it would round the fp32 master copy to bf16, and a resumed run would then
        step from other weights than the run it continues. Those tensors are taken again from
        ``state_dict`` as they were saved.
        """
        saved_ids = list(chain.from_iterable(group["params"] for group in state_dict["param_groups"]))
        params = list(chain.from_iterable(group["params"] for group in self.param_groups))
        saved_state = dict(state_dict["state"])
        super().load_state_dict(state_dict)
        for saved_id, p in zip(saved_ids, params, strict=False):
            values = saved_state.get(saved_id)
            if not values:
                continue
            for key in FP32_STATE:
                if key in values and torch.is_tensor(values[key]):
                    self.state[p][key] = values[key].to(device=p.device, dtype=torch.float32)


def wants_master_weights(setting: Literal["auto", "fp32", "off"], params: Iterable[torch.Tensor]) -> bool:
    """Whether ``optim.master_weights`` = ``setting`` steps an fp32 master copy of ``params`` (the trained
    parameters): ``fp32`` always, ``off`` never, ``auto`` exactly when one of them is bf16 or fp16."""
    if setting == "auto":
        return any(p.dtype in HALF_DTYPES for p in params)
    return setting == "fp32"


def make_optimizer(params: list[torch.nn.Parameter], optim: OptimConfig) -> torch.optim.Optimizer:
    """The optimizer of the trained ``params``: AdamW with ``optim``'s settings, on fp32 master copies
    when :func:`wants_master_weights` says so (:class:`MasterWeightAdamW`), else ``torch.optim.AdamW``."""
    kwargs = {"lr": optim.lr, "betas": optim.betas, "eps": optim.eps, "weight_decay": optim.weight_decay}
    if wants_master_weights(optim.master_weights, params):
        return MasterWeightAdamW(params, **kwargs)
    return torch.optim.AdamW(params, **kwargs)
