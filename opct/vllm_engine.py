"""A vLLM sampling engine behind opct's :class:`~opct.rollout.SamplingEngine` protocol (``train.rollout_engine: vllm``).

vLLM's offline ``LLM`` runs colocated with training on the same GPU. Every (prompt, sample) is one
request with a seed of its own, ``sample_seed(seed, key, sample)``, as in :class:`~opct.rollout.HFSampler`,
so a sample does not depend on what else is in the batch. The engine is created with
``logprobs_mode="raw_logprobs"``: the log-probability recorded for each sampled token is taken from the
model's raw logits, before temperature and top-p, which is what :class:`~opct.rollout.Rollout` defines
(the policy's own distribution, the one the importance ratio and the sampled-token KL need).

Before each step's sampling :meth:`VLLMSampler.load_policy_weights` pushes the policy's current weights
into the engine (a LoRA adapter merged into a copy, :mod:`opct.lora_merge`; the training model is never
modified) and drops vLLM's prefix cache, whose entries were computed with the old weights.

**Unverified on a GPU.** No GPU was available where this was written: it is tested against a fake of
vLLM's API (``tests/test_vllm_engine.py``), which checks the protocol, the request settings and the
weight push, not vLLM itself. The targeted API is vLLM 0.10.2 or later (``logprobs_mode``,
``LLM.collective_rpc``, ``reset_prefix_cache``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from opct.errors import OpctError
from opct.rollout import Rollout, SamplingParams, sample_seed


class VLLMUnavailable(OpctError, RuntimeError):
    """``train.rollout_engine: vllm`` without vLLM installed (or without the GPU it needs)."""


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as err:
        raise VLLMUnavailable(
            "train.rollout_engine: vllm needs vLLM and a CUDA GPU: pip install 'opct[vllm]' "
            f"({err}); or use the default rollout_engine: hf"
        ) from err
    return vllm


def _load_weights_in_worker(worker: Any, weights: list[tuple[str, torch.Tensor]]) -> None:
    """Run inside vLLM's worker: load Hugging Face-named weights into its model."""
    worker.model_runner.model.load_weights(weights=weights)


class VLLMSampler:
    """Samples with a colocated vLLM engine; the same contract as :class:`~opct.rollout.HFSampler`."""

    def __init__(
        self,
        model_path: str,
        eos_ids: Sequence[int],
        *,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.3,
        max_model_len: int | None = None,
        revision: str | None = None,
        trust_remote_code: bool = False,
    ):
        self.vllm = _import_vllm()
        self.eos_ids = list(eos_ids)
        self.llm = self.vllm.LLM(
            model=model_path,
            revision=revision,
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            trust_remote_code=trust_remote_code,
            logprobs_mode="raw_logprobs",
            enable_prefix_caching=True,
            seed=0,
        )
        self._merged: Any = None

    def _request_params(self, params: SamplingParams, seed: int) -> Any:
        return self.vllm.SamplingParams(
            n=1,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            min_tokens=params.min_new_tokens,
            seed=seed,
            logprobs=0,  # the sampled token's own log-prob only
            stop_token_ids=self.eos_ids,
            ignore_eos=False,
            detokenize=False,
            skip_special_tokens=False,
        )

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, sample_keys: list[str] | None = None
    ) -> list[Rollout]:
        """``params.n`` completions per prompt, ordered by (prompt, sample), each with its own seed."""
        keys = sample_keys or [str(i) for i in range(len(prompts))]
        jobs = [(p, s) for p in range(len(prompts)) for s in range(params.n)]
        requests = [{"prompt_token_ids": list(prompts[p])} for p, _ in jobs]
        settings = [self._request_params(params, sample_seed(params.seed, keys[p], s)) for p, s in jobs]
        outputs = self.llm.generate(requests, settings, use_tqdm=False)
        return [self._rollout(prompts[p], p, s, out.outputs[0]) for (p, s), out in zip(jobs, outputs, strict=True)]

    def _rollout(self, prompt: list[int], p: int, s: int, completion: Any) -> Rollout:
        ids = list(completion.token_ids)
        if len(completion.logprobs or []) != len(ids):
            raise RuntimeError(f"vLLM returned {len(completion.logprobs or [])} log-probs for {len(ids)} tokens")
        logprobs = [float(step[tok].logprob) for tok, step in zip(ids, completion.logprobs, strict=True)]
        stopped_at_eos = bool(ids) and ids[-1] in self.eos_ids
        return Rollout(p, s, list(prompt), ids, logprobs, truncated=not stopped_at_eos and completion.finish_reason == "length")

    @torch.no_grad()
    def load_policy_weights(self, policy: torch.nn.Module) -> None:
        """Push ``policy``'s current weights into the engine (LoRA merged into a copy) and drop its prefix cache."""
        self.llm.collective_rpc(_load_weights_in_worker, args=(policy_weights(policy, self),))
        self.llm.reset_prefix_cache()


def policy_weights(policy: torch.nn.Module, holder: Any = None) -> list[tuple[str, torch.Tensor]]:
    """The policy's weights under the base model's Hugging Face names, LoRA merged (``W + scale * B A``).

    A PEFT policy is merged into a :class:`~opct.lora_merge.MergedLoraModel` kept on ``holder`` (built once,
    refreshed at each call); the training model itself is never modified.
    """
    from peft import PeftModel

    if isinstance(policy, PeftModel):
        from opct.lora_merge import MergedLoraModel

        merged = getattr(holder, "_merged", None)
        if merged is None:
            merged = MergedLoraModel(policy)
            if holder is not None:
                holder._merged = merged
        else:
            merged.refresh()
        model = merged.model
    else:
        model = policy
    return [(name, p.detach()) for name, p in model.named_parameters()]
