"""A fake of vLLM's offline API (``vllm.LLM``, ``vllm.SamplingParams``, ``vllm.lora.request.LoRARequest``).

No GPU and no vLLM here. The in-process tests put this module in ``sys.modules["vllm"]``; the
multi-process tests put ``tests/fake_vllm`` first on ``PYTHONPATH``, so ``import vllm`` in every training
process finds it. It records what opct asks for and answers in vLLM's shapes (``RequestOutput.outputs[0]``
with ``token_ids``, ``logprobs`` as one ``{token: Logprob}`` dict per token, ``finish_reason``), decoding
like vLLM: one seeded stream per request, stopping at a stop token id (kept) or at ``max_tokens``.

It also refuses what a real vLLM would not do or would do wrong:

* ``sleep``/``wake_up`` without ``enable_sleep_mode=True``; generating while any part is asleep; generating
  after a level-2 sleep (weights dropped) before new weights were loaded; loading weights while the
  weights are asleep;
* a ``lora_request`` without ``enable_lora=True``, or whose folder lacks ``adapter_config.json`` and
  ``adapter_model.safetensors``, or whose rank exceeds ``max_lora_rank``, or whose tensors are not named
  as PEFT saves them (``...lora_A.weight``, no adapter name);
* an engine built without the launcher's ``RANK``/``WORLD_SIZE`` (vLLM's ``external_launcher`` reads them).

With ``FAKE_VLLM_LOG`` set (a folder), every engine writes what it saw to ``<folder>/rank<R>-engine<N>.json``
after each call: its settings, the process's rank and world size, its events in order, the prompts of
every generation, every full-weights load and every adapter it received (each tensor as its
:func:`tensor_sha256`), so that a test of several processes can read what each process's engine did.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

EOS = 1
OTHER = 2  # a token the fake lists beside the sampled one, more likely, as vLLM's top-k entries are


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    prompt_logprobs: Any
    outputs: list[CompletionOutput]
    finished: bool = True


class SamplingParams:
    def __init__(self, **kwargs: Any):
        self.kwargs = kwargs
        for key, value in kwargs.items():
            setattr(self, key, value)


@dataclass
class FakeEngineModel:
    """The model inside the fake engine: records what ``load_weights`` receives."""

    owner: Any = None
    loads: list[dict[str, torch.Tensor]] = field(default_factory=list)

    def load_weights(self, weights: Any) -> set[str]:
        if self.owner is not None:
            self.owner.check_weights_awake("load_weights")
        got = {name: tensor.detach().clone() for name, tensor in weights}
        self.loads.append(got)
        if self.owner is not None:
            self.owner.event("load_weights")
            self.owner.weights_dropped = False
        return set(got)


def tensor_sha256(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's dtype, shape and bytes: equal exactly when the tensors are."""
    data = tensor.detach().contiguous().cpu()
    digest = hashlib.sha256(f"{data.dtype}:{tuple(data.shape)}".encode())
    digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


class LLM:
    instances: ClassVar[list[LLM]] = []

    def __init__(self, **kwargs: Any):
        if kwargs.get("distributed_executor_backend") == "external_launcher":
            missing = [k for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
            if missing:
                raise RuntimeError(f"external_launcher needs {', '.join(missing)} in the environment")
        if kwargs.get("enable_lora") and not isinstance(kwargs.get("max_lora_rank"), int):
            raise ValueError("enable_lora needs an integer max_lora_rank")
        self.kwargs = kwargs
        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.model = FakeEngineModel(owner=self)
        self.events: list[str] = []
        self.calls: list[tuple[list[dict], list[SamplingParams]]] = []
        self.returned: list[list[RequestOutput]] = []
        self.adapters: list[dict[str, Any]] = []  # one per generation that carried a lora_request
        self.script: dict[tuple[int, ...], list[int]] = {}  # prompt -> the tokens it would decode
        self.drop_logprobs = False
        self.asleep: set[str] = set()
        self.weights_dropped = False
        self.loaded_lora_ids: set[int] = set()  # adapters loaded since the last sleep
        self.dropped_lora_ids: set[int] = set()  # adapters a sleep dropped silently (vllm#53888): served as the base
        self.number = len(LLM.instances)
        LLM.instances.append(self)
        self._log()

    # -- what a real vLLM requires -------------------------------------------------------------
    def event(self, name: str) -> None:
        self.events.append(name)
        self._log()

    def check_weights_awake(self, what: str) -> None:
        if "weights" in self.asleep:
            raise RuntimeError(f"{what} while the engine's weights are asleep: wake_up(tags=['weights']) first")

    def sleep(self, level: int = 1) -> None:
        if not self.kwargs.get("enable_sleep_mode"):
            raise ValueError("sleep mode is not enabled: build the LLM with enable_sleep_mode=True")
        if level not in (1, 2) or self.asleep:
            raise RuntimeError(f"sleep(level={level}) on an engine that is {'asleep' if self.asleep else 'awake'}")
        self.asleep = {"weights", "kv_cache"}
        self.weights_dropped = level == 2
        # as reported for vLLM (vllm#53888): a sleep drops the loaded LoRA adapters without a word, and a later
        # request with the same adapter id is served by the base model
        self.dropped_lora_ids |= self.loaded_lora_ids
        self.loaded_lora_ids = set()
        self.event(f"sleep({level})")

    def wake_up(self, tags: list[str] | None = None) -> None:
        if not self.kwargs.get("enable_sleep_mode"):
            raise ValueError("sleep mode is not enabled: build the LLM with enable_sleep_mode=True")
        tags = ["weights", "kv_cache"] if tags is None else list(tags)
        if set(tags) - {"weights", "kv_cache"}:
            raise ValueError(f"unknown wake_up tags {tags}")
        self.asleep -= set(tags)
        self.event(f"wake_up({','.join(sorted(tags))})")

    def _adapter(self, request: Any) -> dict[str, Any]:
        from safetensors.torch import load_file

        if not self.kwargs.get("enable_lora"):
            raise ValueError("a lora_request needs an engine built with enable_lora=True")
        folder = Path(request.lora_path)
        config = json.loads((folder / "adapter_config.json").read_text())
        if config["r"] > self.kwargs["max_lora_rank"]:
            raise ValueError(f"adapter rank {config['r']} > max_lora_rank {self.kwargs['max_lora_rank']}")
        tensors = load_file(str(folder / "adapter_model.safetensors"))
        bad = [n for n in tensors if not (n.endswith(".lora_A.weight") or n.endswith(".lora_B.weight"))]
        if bad or not tensors:
            raise ValueError(f"not a PEFT adapter's tensor names: {bad[:3] or 'none'}")
        dropped = request.lora_int_id in self.dropped_lora_ids
        self.loaded_lora_ids.add(request.lora_int_id)
        return {"id": request.lora_int_id, "name": request.lora_name, "r": config["r"],
                "tensors": tensors, "served_without_adapter": dropped}

    # -- vLLM's API ---------------------------------------------------------------------------
    def generate(self, prompts: list[dict], sampling_params: list[SamplingParams], *, use_tqdm: bool = True,
                 lora_request: Any = None) -> list:
        assert isinstance(sampling_params, list) and len(sampling_params) == len(prompts)
        if self.asleep:
            raise RuntimeError(f"generate while {sorted(self.asleep)} asleep: wake_up() first")
        if self.weights_dropped:
            raise RuntimeError("generate after sleep(level=2) dropped the weights and none were loaded since")
        if lora_request is not None:
            self.adapters.append(self._adapter(lora_request))
        self.calls.append((prompts, sampling_params))
        out = [self._decode(i, p["prompt_token_ids"], sp) for i, (p, sp) in enumerate(zip(prompts, sampling_params, strict=True))]
        self.returned.append(out)
        self.event("generate" if lora_request is None else f"generate+lora{lora_request.lora_int_id}")
        return out

    def _decode(self, i: int, prompt: list[int], sp: SamplingParams) -> RequestOutput:
        rng = random.Random(f"{sp.seed}|{prompt}|{sp.temperature}")
        stream = self.script.get(tuple(prompt)) or [rng.randrange(3, 200) if rng.random() > 0.2 else EOS for _ in range(64)]
        tokens, finish = [], "length"
        for tok in stream[: sp.max_tokens]:
            if len(tokens) < sp.min_tokens and tok in sp.stop_token_ids:
                tok = 3  # vLLM masks stop tokens before min_tokens
            tokens.append(tok)
            if tok in sp.stop_token_ids and not sp.ignore_eos:
                finish = "stop"
                break
        steps = [{tok: Logprob(-round(rng.uniform(0.5, 5.0), 3)), OTHER: Logprob(-0.01)} for tok in tokens]
        completion = CompletionOutput(0, "", tokens, None, None if self.drop_logprobs else steps, finish)
        return RequestOutput(str(i), None, list(prompt), None, [completion])

    def apply_model(self, func: Any) -> list:
        return [func(self.model)]

    def reset_prefix_cache(self) -> bool:
        self.event("reset_prefix_cache")
        return True

    def _log(self) -> None:
        folder = os.environ.get("FAKE_VLLM_LOG")
        if not folder:
            return
        record = {
            "rank": self.rank,
            "world_size": self.world_size,
            "settings": {k: v for k, v in self.kwargs.items() if isinstance(v, str | int | float | bool | type(None))},
            "events": self.events,
            "prompts": [[p["prompt_token_ids"] for p in prompts] for prompts, _ in self.calls],
            "full_weight_loads": [{n: tensor_sha256(t) for n, t in load.items()} for load in self.model.loads],
            "adapters": [{**a, "tensors": {n: tensor_sha256(t) for n, t in a["tensors"].items()}} for a in self.adapters],
        }
        (Path(folder) / f"rank{self.rank}-engine{self.number}.json").write_text(json.dumps(record))
