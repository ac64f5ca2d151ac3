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

**Weights.** :meth:`VLLMSampler.load_policy_weights` makes the engine sample from the current policy
(call it before each step's sampling):

* a LoRA policy (PEFT) is pushed **as its adapter only**: the engine is built with vLLM's LoRA support
  (``enable_lora``, ``max_lora_rank``), the adapter is written as a PEFT folder and every request carries
  its ``LoRARequest`` (a new id per push, so vLLM never serves a stale adapter); the base weights in the
  engine are never touched. Under FSDP2 each adapter tensor is gathered whole (``DTensor.full_tensor()``,
  collective: every process pushes);
* any other policy is pushed as full weights (``load_weights`` on the engine's model, through
  ``apply_model``), gathered first under FSDP2 by the ``gather`` the loop gives (FSDP2's public
  ``unshard``/``reshard``, :func:`opct.training.fsdp.gathered`); vLLM's prefix cache, computed with the
  old weights, is dropped.

**One engine per process.** Under DDP or FSDP2 every training process builds its own engine on its own
GPU (vLLM's ``external_launcher`` backend reads the launcher's ``RANK``/``WORLD_SIZE``) and samples its
own share of the step's prompts; no weights cross processes except what FSDP2 gathers.

**Sleep mode.** The engine is built with ``enable_sleep_mode=True`` (``vllm_engine_args`` may turn it
off): after each generation it sleeps (``llm.sleep``), giving its KV cache and weights' GPU memory back
for the scoring forwards and the backward pass, and it wakes (``llm.wake_up``) before the next sync and
generation. Level 1 (weights kept in host memory) when its base weights must survive (LoRA, or weights
it never received), level 2 (weights dropped) when full weights are pushed before every generation; then
the weights wake first (``tags=["weights"]``), are loaded, and the KV cache wakes for the generation. vLLM has
been reported to drop loaded LoRA adapters in sleep and then serve their id with the base model, silently
(vllm#53888), so after every wake the current adapter is given a new id, which vLLM loads from its folder again.

Written against vLLM 0.33.0 (its ``LLM``, ``SamplingParams``, ``RequestOutput``, ``LoRARequest``,
``sleep``/``wake_up``); ``logprobs_mode`` needs 0.10.2 or later. **Unverified on a GPU**: the tests run
against a fake of vLLM's API (``tests/fake_vllm/``), also on two gloo processes (docs/training.md says
what that does and does not show).
"""

from __future__ import annotations

import gc
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from safetensors.torch import save_file

from opct.errors import OpctError
from opct.models import eos_token_ids, is_peft, resolve_model_path
from opct.sampling.engine import Rollout, SamplingParams, sample_seed
from opct.sampling.merged_lora import merged_weights

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from opct.config import GenerationConfig, ModelConfig

INSTALL_HINT = "pip install 'opct[vllm]'"
#: ``vllm.LLM`` arguments the sampler's contract rests on: ``engine_args`` may not change them.
FIXED_ENGINE_ARGS = ("model", "logprobs_mode", "generation_config", "distributed_executor_backend", "enable_lora",
                     "max_lora_rank")
#: The LoRA ranks vLLM accepts for ``max_lora_rank``; an adapter of rank r takes the smallest one at least r.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


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
    """What vLLM's ``external_launcher`` backend reads to run its worker in this process: a launcher's
    values (``accelerate launch``, torchrun: this process's rank in the training world, one engine per
    rank) are kept; a process started alone is rank 0 of 1."""
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
    log-probs are computed at the precision the policy has. ``lora_rank``: the rank of the LoRA policy whose
    adapter :meth:`load_policy_weights` will push (turns vLLM's LoRA support on); None for full weights.
    ``engine_args`` go to ``vllm.LLM`` as they are and override the settings below, except
    :data:`FIXED_ENGINE_ARGS`.
    """

    #: The engine samples from its own copy of the weights: the policy need not be gathered to sample.
    holds_own_weights: ClassVar[bool] = True

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
        lora_rank: int | None = None,
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
            "enable_sleep_mode": True,  # its GPU memory goes back to training between generations
            **(engine_args or {}),
        }
        if lora_rank is not None:  # the adapter is pushed, not merged weights
            settings.update(enable_lora=True, max_lora_rank=min(r for r in VLLM_LORA_RANKS if r >= lora_rank), max_loras=1)
        self.sleeps = bool(settings["enable_sleep_mode"])
        self.lora_rank = lora_rank
        self.lora_request: Any = None  # the adapter the requests carry, once pushed
        self._adapter_served = False  # whether a generation used lora_request since it was pushed or re-added
        self._adapter_root: Path | None = None
        self._asleep: set[str] = set()  # "weights", "kv_cache": what is asleep now
        self._weights_dropped = False  # by a level-2 sleep, until full weights are pushed again
        self._full_weights_pushed = False
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
            lora_rank=_adapter_rank(model),
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
        self._wake({"weights", "kv_cache"})
        if self._weights_dropped:
            raise RuntimeError("the vLLM engine's weights were dropped by its last sleep and not pushed again: "
                               "call load_policy_weights before generating")
        adapter = {"lora_request": self.lora_request} if self.lora_request is not None else {}
        # vLLM runs its model in this thread: the training autocast must not reach its kernels
        with torch.autocast("cuda", enabled=False):
            outputs = self.llm.generate(requests, settings, use_tqdm=False, **adapter)
        self._adapter_served = self.lora_request is not None  # loaded now; a sleep may drop it (_readd_adapter)
        self._sleep()
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

    def _wake(self, tags: set[str]) -> None:
        waking = sorted(self._asleep & tags)
        if waking:
            self.llm.wake_up(tags=waking)
            self._asleep -= set(waking)
            if "weights" in waking and self.lora_request is not None and self._adapter_served:
                self._readd_adapter()

    def _readd_adapter(self) -> None:
        """Point the requests at the current adapter under a new id, after the weights woke: vLLM has been
        reported to drop loaded LoRA adapters in sleep and then serve their id with the base model, silently
        (vllm#53888); a new id makes it load the adapter's folder again."""
        from vllm.lora.request import LoRARequest  # the optional extra, imported once an engine exists

        version = self.lora_request.lora_int_id + 1
        self.lora_request = LoRARequest(f"opct-policy-v{version}", version, self.lora_request.lora_path)
        self._adapter_served = False

    def _sleep(self) -> None:
        """Give the engine's GPU memory back until the next generation (with sleep mode on): level 2 (weights
        dropped) only when full weights are pushed before every generation, else level 1 (kept in host memory)."""
        if not self.sleeps:
            return
        level = 2 if self._full_weights_pushed else 1
        self.llm.sleep(level=level)
        self._asleep = {"weights", "kv_cache"}
        self._weights_dropped = level == 2

    @torch.no_grad()
    def load_policy_weights(
        self, model: torch.nn.Module, gather: Callable[[torch.nn.Module], AbstractContextManager[Any]] | None = None
    ) -> None:
        """Make the engine sample from ``model``'s current weights (call it before each step's sampling).

        A LoRA policy, with an engine built for one (``lora_rank``), is pushed as its adapter only
        (:meth:`_push_adapter`). Otherwise the full weights are pushed, a LoRA adapter merged one weight at a
        time (:func:`opct.sampling.merged_lora.merged_weights`), inside ``gather(model)`` when the weights are
        sharded (every process must call this then); ``model`` itself is not modified.
        """
        if self.lora_rank is not None and is_peft(model):
            self._push_adapter(model)
            return
        self._wake({"weights"})
        with gather(model) if gather is not None else nullcontext(model):
            weights = merged_weights(model)
            self.llm.apply_model(lambda engine_model: engine_model.load_weights(weights))
        self._weights_dropped = False
        self._full_weights_pushed = True
        if "kv_cache" not in self._asleep:  # a sleeping KV cache wakes empty
            self.llm.reset_prefix_cache()

    def _push_adapter(self, model: torch.nn.Module) -> None:
        """Write the policy's adapter as a PEFT folder (whole tensors: each gathered under FSDP2, collective) and
        point the requests at it with a new ``LoRARequest`` id."""
        from vllm.lora.request import LoRARequest  # the optional extra, imported once an engine exists

        tensors = {}
        for name, param in model.named_parameters():  # the same order on every process
            if "lora_" not in name:
                continue
            whole = param.full_tensor() if hasattr(param, "full_tensor") else param
            tensors[name.replace(".default.", ".")] = whole.detach().to("cpu", copy=True).contiguous()
        version = 1 if self.lora_request is None else self.lora_request.lora_int_id + 1
        if self._adapter_root is None:
            self._adapter_root = Path(tempfile.mkdtemp(prefix="opct-vllm-adapter-"))
        folder = self._adapter_root / f"v{version}"
        folder.mkdir()
        save_file(tensors, str(folder / "adapter_model.safetensors"))
        model.peft_config["default"].save_pretrained(str(folder))
        if self.lora_request is not None:  # the previous adapter was read when its requests ran
            shutil.rmtree(self.lora_request.lora_path, ignore_errors=True)
        self.lora_request = LoRARequest(f"opct-policy-v{version}", version, str(folder))
        self._adapter_served = False

    def close(self) -> None:
        """Drop the engine and give its GPU memory (weights and KV cache) back, as far as vLLM lets go of it."""
        llm, self.llm = getattr(self, "llm", None), None
        del llm
        if getattr(self, "_adapter_root", None) is not None:
            shutil.rmtree(self._adapter_root, ignore_errors=True)
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _adapter_rank(model: torch.nn.Module) -> int | None:
    """The LoRA rank of a PEFT policy (its adapter is what the engine receives), None for any other model."""
    if not is_peft(model):
        return None
    config = model.peft_config["default"]
    ranks = [config.r, *getattr(config, "rank_pattern", {}).values()]
    return max(ranks)
