"""``make_sampler``: the sampling engine that ``sampling.engine`` names (``hf`` or ``vllm``)."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from opct.sampling.engine import SamplingEngine
from opct.sampling.hf_sampler import HFSampler
from opct.sampling.vllm_sampler import VLLMSampler


def make_sampler(
    gen: Any,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    spec: Any = None,
    share_prefix: bool = True,
) -> SamplingEngine:
    """The sampling engine ``gen.engine`` names for ``model`` (``gen``: an :class:`opct.config.SamplingConfig`;
    a plain :class:`opct.config.GenerationConfig` has no engine key and means ``hf``).

    ``hf``: an :class:`HFSampler` on ``model``. ``vllm``: an :class:`opct.sampling.vllm_sampler.VLLMSampler` that
    loads the weights ``spec`` (an :class:`opct.config.ModelConfig`) names in ``model``'s dtype; it samples
    from them until its ``load_policy_weights`` pushes others.
    """
    engine = getattr(gen, "engine", "hf")
    if engine == "hf":
        return HFSampler(model, tokenizer, batch_size=gen.sequences_per_call, share_prefix=share_prefix,
                         decoder=getattr(gen, "decoder", "auto"))
    if engine != "vllm":
        raise ValueError(f"unknown sampling engine {engine!r}; use hf or vllm")
    if spec is None:
        raise ValueError("sampling.engine: vllm needs the model spec its engine loads the weights from")

    return VLLMSampler.for_model(spec, model, tokenizer, gen)
