"""A vLLM sampling engine behind :class:`~opct.sampling.engine.SamplingEngine` (``sampling.engine: vllm``).

:class:`VLLMSampler` runs vLLM's offline ``LLM`` in the training process, on the training GPU
(colocated), and keeps :class:`~opct.sampling.engine.Rollout`'s contract:

* every (prompt, sample) is one request with its own seed, ``sample_seed(seed, key, sample)``, so the
  random stream of a sample does not depend on the batch (its logits can still differ at float
  rounding with the batch's composition unless vLLM runs batch-invariant, ``VLLM_BATCH_INVARIANT=1``);
* the recorded log-probability of each sampled token is the model's own, at temperature 1 and over
  the whole vocabulary: the engine is built with ``logprobs_mode="raw_logprobs"`` (log-softmax of
  the logits before any processor, temperature or top-p) and each request asks for ``logprobs=0``
  (the sampled token's alone);
* nothing of the model's ``generation_config`` is used (``generation_config="vllm"``): only
  :class:`~opct.sampling.engine.SamplingParams` decides, and generation stops at the model's EOS ids, which
  the completion keeps; ``truncated`` is vLLM's ``finish_reason == "length"`` (``max_new_tokens``, or the
  engine's ``max_model_len``, reached).

The same seed draws other tokens here than in :class:`~opct.sampling.hf_sampler.HFSampler` (another sampler).
:meth:`VLLMSampler.load_policy_weights` pushes the current policy into the engine (a LoRA adapter
merged on the fly by :func:`opct.sampling.merged_lora.merged_weights`, the training model untouched) and drops
vLLM's prefix cache, computed with the old weights.

Written against vLLM 0.33.0 (its ``LLM``, ``SamplingParams`` and ``RequestOutput``); ``logprobs_mode``
needs 0.10.2 or later. **Unverified on a GPU**: the tests run against a fake of vLLM's API.
"""

from __future__ import annotations

import gc
import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from opct.errors import OpctError
from opct.models import eos_token_ids, resolve_model_path
from opct.sampling.engine import Rollout, SamplingParams, sample_seed
from opct.sampling.merged_lora import merged_weights

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from opct.config import GenerationConfig, ModelConfig

INSTALL_HINT = "pip install 'opct[vllm]'"
#: ``vllm.LLM`` arguments the sampler's contract rests on: ``engine_args`` may not change them.
FIXED_ENGINE_ARGS = ("model", "logprobs_mode", "generation_config", "distributed_executor_backend")


class VLLMUnavailable(OpctError, RuntimeError):
    """``sampling.engine: vllm`` where vLLM is not installed, or without the CUDA GPU it needs."""


def import_vllm() -> Any:
    """The ``vllm`` module, or :class:`VLLMUnavailable` saying how to get it."""
    try:
        import vllm
    except ImportError as err:
        raise VLLMUnavailable(
            f"sampling.engine: vllm needs the vllm package and a CUDA GPU: {INSTALL_HINT} ({err}); "
            "or set sampling.engine: hf"
        ) from err
    if not torch.cuda.is_available():
        raise VLLMUnavailable("sampling.engine: vllm needs a CUDA GPU and torch sees none; set sampling.engine: hf")
    return vllm


def _colocated_process_env() -> None:
    """What vLLM's ``external_launcher`` backend reads to run its worker in this process (one process:
    rank 0 of 1); values a launcher already set are kept."""
    defaults = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(sock.getsockname()[1])


class VLLMSampler:
    """Sampling engine on a colocated vLLM ``LLM``: the contract of :class:`~opct.sampling.hf_sampler.HFSampler`.

    ``model_path`` holds the weights the engine starts from (the run's base model); ``eos_ids`` end a
    completion. ``dtype`` should be the policy's (``float32``, ``bfloat16``, ...), so the recorded
    log-probs are computed at the precision the policy has. ``engine_args`` go to ``vllm.LLM`` as they are
    and override the settings below, except :data:`FIXED_ENGINE_ARGS`.
    """

    def __init__(
        self,
        model_path: str,
        eos_ids: Sequence[int],
        *,
        dtype: str = "auto",
        revision: str | None = None,
        trust_remote_code: bool = False,
        gpu_memory_utilization: float = 0.3,
        max_model_len: int | None = None,
        engine_args: dict[str, Any] | None = None,
    ):
        fixed = sorted(set(engine_args or {}) & set(FIXED_ENGINE_ARGS))
        if fixed:
            raise ValueError(f"vllm_engine_args may not set {', '.join(fixed)}: the sampler's contract depends on them")
        self.vllm = import_vllm()
        self.eos_ids = sorted({int(i) for i in eos_ids})
        if not self.eos_ids:
            raise ValueError("VLLMSampler needs at least one end-of-sequence token id")
        _colocated_process_env()
        settings: dict[str, Any] = {
            "model": model_path,
            "revision": revision,
            "dtype": dtype,
            "trust_remote_code": trust_remote_code,
            "gpu_memory_utilization": gpu_memory_utilization,
            "max_model_len": max_model_len,
            # the worker in this process: weights are pushed to it directly, not serialised
            "distributed_executor_backend": "external_launcher",
            "logprobs_mode": "raw_logprobs",  # the model's own log-probs, before temperature and top-p
            "generation_config": "vllm",  # no sampling defaults from the checkpoint's generation_config
            **(engine_args or {}),
        }
        self.llm = self.vllm.LLM(**settings)

    @classmethod
    def for_model(
        cls, spec: ModelConfig, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, gen: GenerationConfig
    ) -> VLLMSampler:
        """An engine for ``model``, loaded from the weights ``spec`` names, in ``model``'s dtype, with the
        ``vllm_*`` settings of ``gen`` (a :class:`opct.config.SamplingConfig`)."""
        dtype = next(model.parameters()).dtype
        return cls(
            resolve_model_path(spec.name_or_path),
            eos_token_ids(model, tokenizer),
            dtype=str(dtype).removeprefix("torch."),
            revision=spec.revision,
            trust_remote_code=spec.trust_remote_code,
            gpu_memory_utilization=getattr(gen, "vllm_gpu_memory_utilization", 0.3),
            engine_args=getattr(gen, "vllm_engine_args", None),
        )

    def request_params(self, params: SamplingParams, seed: int) -> Any:
        """vLLM's ``SamplingParams`` for one sample of ``params`` drawn with ``seed``."""
        return self.vllm.SamplingParams(
            n=1,
            seed=seed,
            temperature=params.temperature,  # 0: greedy
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            min_tokens=params.min_new_tokens,
            stop_token_ids=list(self.eos_ids),
            ignore_eos=False,
            logprobs=0,  # the sampled token's log-prob only
            detokenize=False,
        )

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, sample_keys: list[str] | None = None
    ) -> list[Rollout]:
        """``params.n`` completions of every prompt, ordered by (prompt, sample).

        ``sample_keys`` (one per prompt, e.g. pair ids) give each sample its seed, whatever else is in
        the call; by default the prompt's position is its key.
        """
        keys = sample_keys if sample_keys is not None else [str(i) for i in range(len(prompts))]
        if len(keys) != len(prompts):
            raise ValueError(f"{len(keys)} sample keys for {len(prompts)} prompts")
        jobs = [(p, s) for p in range(len(prompts)) for s in range(params.n)]
        if not jobs:
            return []
        requests = [{"prompt_token_ids": [int(t) for t in prompts[p]]} for p, _ in jobs]
        settings = [self.request_params(params, sample_seed(params.seed, keys[p], s)) for p, s in jobs]
        # vLLM runs its model in this thread: the training autocast must not reach its kernels
        with torch.autocast("cuda", enabled=False):
            outputs = self.llm.generate(requests, settings, use_tqdm=False)
        if len(outputs) != len(jobs):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(jobs)} requests")
        return [self._rollout(prompts[p], p, s, out) for (p, s), out in zip(jobs, outputs, strict=True)]

    def _rollout(self, prompt: list[int], p: int, s: int, output: Any) -> Rollout:
        """One request's output as a :class:`~opct.sampling.engine.Rollout` (vLLM returns them in request order)."""
        if list(output.prompt_token_ids) != list(prompt):
            raise RuntimeError(f"vLLM's output for prompt {p} sample {s} is for another prompt (outputs out of order)")
        completion = output.outputs[0]
        ids = [int(t) for t in completion.token_ids]
        steps = completion.logprobs
        if steps is None or len(steps) != len(ids):
            got = "none" if steps is None else len(steps)
            raise RuntimeError(f"vLLM returned {got} log-prob entries for {len(ids)} sampled tokens (prompt {p}, sample {s})")
        logprobs = []
        for t, (token, step) in enumerate(zip(ids, steps, strict=True)):
            if token not in step:
                raise RuntimeError(f"vLLM gave no log-prob for the sampled token {token} at position {t} (prompt {p})")
            logprobs.append(float(step[token].logprob))
        return Rollout(
            prompt_index=p,
            sample_index=s,
            prompt_ids=list(prompt),
            completion_ids=ids,
            logprobs=logprobs,
            truncated=completion.finish_reason == "length",
        )

    @torch.no_grad()
    def load_policy_weights(self, model: torch.nn.Module) -> None:
        """Make the engine sample from ``model``'s current weights (call it after each optimizer step).

        A LoRA policy is merged one weight at a time (:func:`opct.sampling.merged_lora.merged_weights`); ``model``
        itself is not modified. vLLM's prefix cache, computed with the old weights, is dropped.
        """
        weights = merged_weights(model)
        self.llm.apply_model(lambda engine_model: engine_model.load_weights(weights))
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Drop the engine and give its GPU memory (weights and KV cache) back, as far as vLLM lets go of it."""
        llm, self.llm = getattr(self, "llm", None), None
        del llm
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
