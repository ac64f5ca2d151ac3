r"""ACT, activation consistency training (Irpan, Turner et al. 2025, arXiv 2510.27062).

The student reads the perturbed ``prompt`` ``x``; the frozen run-start model reads the clean
``teacher_prompt`` ``x'``. Their residual streams (each decoder layer's output) are compared on the
positions the two prompts share at their end, and the student's are pulled toward the frozen model's:

.. math::

    \mathcal{L} = \sum_{t \in S} \frac{1}{|\mathcal{L}|\, d} \sum_{l \in \mathcal{L}}
        \big\lVert h^{\theta}_{l}(x)_{t} - \mathrm{sg}\big[h^{\text{ref}}_{l}(x')_{t'}\big] \big\rVert_2^2

``S`` is the shared suffix: the longest run of token ids that ends both rendered prompts (the request
and the generation prompt, typically), position ``t`` in ``x`` aligned with ``t'`` in ``x'`` counting
from the end. ``\mathcal{L}`` is the set of layers (``act.layers``; default all), ``d`` the hidden size.
The training loop divides the summed loss by the number of aligned positions in the global batch, so
the logged loss is the mean squared activation difference per position, layer and dimension. No
generation: ACT trains on the prompts alone.

A pair whose prompts share no final token has nothing to align and is an error naming it. With
identical prompts the student starts exactly at the frozen model's activations, so the loss and its
gradient are zero. With LoRA the frozen model is the student with its adapter switched off; with full
fine-tuning, the immutable copy (:class:`opct.models.Teacher`). Activations are read by forward hooks on
the decoder layers of any Hugging Face decoder (:func:`decoder_layers`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, ClassVar, Literal

import torch
from pydantic import Field

from opct.config import AnyValue, ConfigError, RunConfig, StrictSettings
from opct.methods.base import Microbatch, TrainContext, split_microbatches
from opct.pairs import ConsistencyPair


class ACTConfig(StrictSettings):
    """``method: act``: which residual-stream layers are matched (default: every decoder layer), where the
    last one is read, and how the squared distance is reduced over the hidden dimension."""

    layers: list[Annotated[int, AnyValue("a layer index, negative counting from the last: checked against the "
                                         "model's layers when it loads (chosen_layers)")]] | None = Field(
        None, description="decoder layer indices to match (negative counts from the last); None: all layers"
    )
    last_layer: Literal["before_norm", "after_norm"] = Field(
        "before_norm", description="before_norm: the last decoder layer's output, as every other layer's (the residual "
        "stream; opct's default); after_norm: after the model's final norm, Hugging Face's hidden_states[-1] (CTM's)")
    hidden_reduction: Literal["mean", "sum"] = Field(
        "mean", description="mean: the squared distance averaged over the hidden dimension (opct's default: the "
        "loss's scale does not grow with the model's width); sum: summed over it (CTM's, d times mean's)")


def shared_suffix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many final token ids ``a`` and ``b`` share (0 when their last tokens differ)."""
    n = 0
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if x != y:
            break
        n += 1
    return n


def activation_distance(student: torch.Tensor, reference: torch.Tensor, hidden_reduction: str = "mean") -> torch.Tensor:
    r"""The summed ACT loss of aligned activations ``[layers, positions, hidden]``: for each position, the
    squared L2 distance averaged over layers and hidden dimensions, summed over positions
    (:math:`\sum_t \frac{1}{|\mathcal{L}| d} \sum_l \lVert h_{l,t} - h^{\text{ref}}_{l,t} \rVert^2`);
    ``hidden_reduction="sum"`` leaves out the ``1/d`` (CTM's convention). ``reference`` carries no gradient."""
    if student.shape != reference.shape:
        raise ValueError(f"activations differ in shape: student {tuple(student.shape)}, reference {tuple(reference.shape)}")
    if hidden_reduction not in ("mean", "sum"):
        raise ValueError(f"hidden_reduction must be mean or sum, got {hidden_reduction!r}")
    layers, _, hidden = student.shape
    diff = student.float() - reference.detach().float()
    return diff.pow(2).sum() / (layers * (hidden if hidden_reduction == "mean" else 1))


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The decoder layers of a Hugging Face causal LM (``model.layers`` of Llama and Qwen3,
    ``transformer.h`` of GPT-2, under a PEFT wrapper or not): the first module list as long as the
    config's ``num_hidden_layers``."""
    config = getattr(model, "config", None)
    count = getattr(config, "num_hidden_layers", None)
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and count is not None and len(module) == count:
            return module
    raise ConfigError(
        f"method act reads each decoder layer's output, but {type(model).__name__} has no module list of "
        f"num_hidden_layers={count} layers; ACT supports Hugging Face decoders (Llama, Qwen3, GPT-2, ...)"
    )


def chosen_layers(layers: list[int] | None, count: int) -> list[int]:
    """Layer indices ``layers`` (negative from the end; None: all) checked against ``count`` layers."""
    if layers is None:
        return list(range(count))
    bad = [i for i in layers if not -count <= i < count]
    if bad:
        raise ConfigError(f"act.layers: {bad} out of range for a model with {count} decoder layers (use 0..{count - 1} or negatives)")
    return sorted({i % count for i in layers})


@contextmanager
def residual_streams(model: torch.nn.Module, layers: list[int]) -> Iterator[list[torch.Tensor]]:
    """Within the block, each forward of ``model`` appends the outputs of ``layers`` (``[batch, seq,
    hidden]`` each, in layer order) to the yielded list."""
    found: list[torch.Tensor] = []
    modules = decoder_layers(model)

    def keep(_module: torch.nn.Module, _inputs: Any, output: Any) -> None:
        found.append(output[0] if isinstance(output, tuple) else output)

    handles = [modules[i].register_forward_hook(keep) for i in layers]
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()


def _padded(prompts: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):  # right padding: a prompt's real tokens keep positions 0..len-1
        ids[i, : len(p)] = torch.tensor(p)
        mask[i, : len(p)] = 1
    return ids.to(device), mask.to(device)


def aligned_activations(
    model: torch.nn.Module, hooked: torch.nn.Module, prompts: list[list[int]], suffix: list[int], layers: list[int],
    pad_id: int, device: torch.device, last_after_norm: bool = False,
) -> torch.Tensor:
    """The residual streams of ``layers`` on the last ``suffix[i]`` tokens of each prompt, as
    ``[layers, sum(suffix), hidden]`` (prompts in order). ``model`` runs the forward; ``hooked`` is the
    module whose decoder layers are read (the same module, unwrapped). ``last_after_norm``: the last
    decoder layer, when chosen, is read after the model's final norm (``hidden_states[-1]``)."""
    ids, mask = _padded(prompts, pad_id, device)
    last = len(decoder_layers(hooked)) - 1
    after_norm = last_after_norm and last in layers
    with residual_streams(hooked, layers) as found:
        out = model(input_ids=ids, attention_mask=mask, use_cache=False, output_hidden_states=after_norm)
    if after_norm:  # Hugging Face appends the final norm's output as the last hidden state
        found[layers.index(last)] = out.hidden_states[-1]
    rows = []
    for acts in found:
        rows.append(torch.cat([acts[i, len(p) - k : len(p)] for i, (p, k) in enumerate(zip(prompts, suffix, strict=True))]))
    return torch.stack(rows)


class ACTMethod:
    """ACT: the student's residual streams on ``prompt`` pulled toward the frozen model's on ``teacher_prompt``."""

    name: ClassVar[str] = "act"
    config_class: ClassVar[type[ACTConfig]] = ACTConfig
    stats: ClassVar[dict[str, tuple[str, str]]] = {}
    logs_rollouts: ClassVar[bool] = False
    #: Nothing is generated; the frozen model reads the teacher prompt of every position trained on.
    compute: ClassVar[dict[str, str]] = {"generated": "none", "teacher_scored": "trained"}

    @classmethod
    def check_launch(cls, cfg: RunConfig, *, processes: int, sharded: bool) -> None:
        """What the launch refuses (:func:`opct.training.launch_checks.check_launch`, the dry run's too)."""
        if sharded:
            raise ConfigError("method act reads activations with forward hooks, which are not supported under FSDP yet; "
                              "train ACT with DDP or one process")

    def __init__(self, ctx: TrainContext):
        self.check_launch(ctx.cfg, processes=ctx.accelerator.num_processes, sharded=ctx.sharded)
        self.ctx = ctx
        self.settings: ACTConfig = ctx.cfg.method_config
        self.layers = chosen_layers(self.settings.layers, len(decoder_layers(ctx.policy)))

    def setup(self, pairs: list[ConsistencyPair]) -> None:
        """Check every pair has a shared suffix before the first step (the error names the pair)."""
        for p in pairs:
            self.suffix(p)

    def suffix(self, pair: ConsistencyPair) -> list[int]:
        """The token ids the pair's two rendered prompts share at their end (an error when none)."""
        prompt, teacher = self.ctx.render(pair.prompt), self.ctx.render(pair.teacher_prompt)
        k = shared_suffix_length(prompt, teacher)
        if k == 0:
            raise ConfigError(
                f"pair {pair.id}: its prompt and teacher_prompt share no final token, so ACT has no positions to "
                "align; ACT needs the two prompts to end alike (the request and the generation prompt)"
            )
        return prompt[-k:]

    def prepare(self, pairs: list[ConsistencyPair], step: int) -> list[Microbatch]:
        """One sequence per pair: its shared suffix (the positions ACT trains on, counted as its tokens)."""
        return split_microbatches(pairs, [self.suffix(p) for p in pairs], list(range(len(pairs))),
                                  self.ctx.cfg.train.sequences_per_microbatch)

    def loss(self, mb: Microbatch) -> tuple[torch.Tensor, dict[str, float]]:
        ctx, suffix = self.ctx, [len(c) for c in mb.completions]
        prompts = [ctx.render(p.prompt) for p in mb.pairs]
        teacher_prompts = [ctx.render(p.teacher_prompt) for p in mb.pairs]
        device = ctx.accelerator.device
        after = self.settings.last_layer == "after_norm"
        with torch.no_grad(), ctx.teacher.active() as reference, ctx.accelerator.autocast():
            target = aligned_activations(reference, reference, teacher_prompts, suffix, self.layers, ctx.pad_id, device,
                                         after)
        with ctx.accelerator.autocast():
            student = aligned_activations(ctx.model, ctx.policy, prompts, suffix, self.layers, ctx.pad_id, device, after)
        return activation_distance(student, target, self.settings.hidden_reduction), {"sequences": float(len(mb.completions))}
