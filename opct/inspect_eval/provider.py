"""opct's sampler as an Inspect model provider: ``--model opct/<model>``.

``<model>`` is anything ``opct eval --model`` takes: ``organism`` (or another alias), a local folder,
a hub id, a run directory or its ``final/`` (rendered with the settings it was trained with). Model
arguments (``-M``): ``device``, ``dtype``, ``revision``, ``trust_remote_code``, ``chat_template``,
``system_prompt``, ``batch_size`` (sequences per forward), ``threads``.

Generation is opct's :class:`~opct.sampling.hf_sampler.HFSampler`: the model's forward only (nothing of its
``generation_config``), each sample drawn from its own seeded random stream, so a sample does not
depend on which other samples share its batch. Under opct's solver (:func:`opct.inspect_eval.bridge.opct_generate`)
the stream is the one ``opct eval`` gives that unit and sample, so greedy and sampled runs reproduce
``opct eval``'s tokens. Concurrent requests are gathered into batches of up to ``batch_size``.

Token counting uses the model's own tokenizer, never a downloaded one (Inspect's default counts
with tiktoken, whose encodings are fetched from the internet), so the provider works offline.

A model that cannot be loaded, or an unknown ``-M`` argument, is one line (``error: model opct/...:
...``, :mod:`opct.inspect_eval.errors`), not a traceback. A ``max_tokens`` below 1 is an error, never
read as "no limit".
"""

from __future__ import annotations

import asyncio
import hashlib
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelOutput, ModelUsage, modelapi
from inspect_ai.tool import ToolChoice, ToolInfo

from opct.config import ConfigError, ModelConfig, validate_config
from opct.errors import OpctError
from opct.inspect_eval.errors import one_line_errors
from opct.quiet import quiet_output, verbose_enabled
from opct.sampling.engine import Rollout, SamplingParams, sample_seed

#: How long a batch waits for more concurrent requests before it runs (seconds).
GATHER_S = 0.02
#: The ``-M`` model arguments the provider reads itself; the others are :class:`opct.config.ModelConfig` fields.
PROVIDER_ARGS = ("batch_size", "threads")


@dataclass(frozen=True)
class _Request:
    prompt: list[int]
    seed: int
    params: SamplingParams


class _Batcher:
    """Gathers concurrent requests and runs each group of equal settings as one batch, off the event loop."""

    def __init__(self, engine: Any, max_batch: int):
        self.engine = engine
        self.max_batch = max_batch
        self.pending: list[tuple[_Request, asyncio.Future[Rollout]]] = []
        self.runner: asyncio.Task[None] | None = None

    async def submit(self, request: _Request) -> Rollout:
        future: asyncio.Future[Rollout] = asyncio.get_running_loop().create_future()
        self.pending.append((request, future))
        if self.runner is None:
            self.runner = asyncio.create_task(self._run())
        return await future

    async def _run(self) -> None:
        try:
            while self.pending:
                await asyncio.sleep(GATHER_S)
                params = self.pending[0][0].params
                batch = [item for item in self.pending if item[0].params == params][: self.max_batch]
                taken = {id(item[1]) for item in batch}
                self.pending = [item for item in self.pending if id(item[1]) not in taken]
                requests = [r for r, _ in batch]
                try:
                    out = await asyncio.to_thread(
                        self.engine.generate_seeded, [r.prompt for r in requests], params, [r.seed for r in requests]
                    )
                except Exception as exc:  # every waiting sample sees the failure
                    for _, future in batch:
                        future.set_exception(exc)
                    continue
                for (_, future), rollout in zip(batch, out, strict=True):
                    future.set_result(rollout)
        finally:
            self.runner = None


class OpctModelAPI(ModelAPI):
    """An opct-loaded model (any causal LM opct can load) generating with opct's seeded sampler."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),  # noqa: B008  (Inspect's own signature)
        **model_args: Any,
    ):
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=config)
        # deferred: loads torch and transformers only when called
        from opct.sampling.hf_sampler import HFSampler

        with one_line_errors(f"model opct/{model_name}"):
            batch_size = self._load(model_name, model_args)
        self.engine = HFSampler(self.model, self.tokenizer, batch_size=batch_size)
        self.batcher = _Batcher(self.engine, batch_size)

    def _load(self, model_name: str, model_args: dict[str, Any]) -> int:
        """Load the model, tokenizer and renderer ``-M`` asks for; returns the batch size."""
        # deferred: loads torch and transformers only when called
        from opct.models import inference_spec, load_spec_for_inference

        known = (*PROVIDER_ARGS, *(f for f in ModelConfig.model_fields if f != "name_or_path"))
        unknown = sorted(set(model_args) - set(known))
        if unknown:
            raise ConfigError(f"-M {unknown[0]}: not a model argument of the opct provider; use {', '.join(known)}")
        threads, batch_size = model_args.pop("threads", None), model_args.pop("batch_size", 64)
        for name, value in (("threads", threads), ("batch_size", batch_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"-M {name}={value!r}: must be a whole number of at least 1")
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        spec = inference_spec(validate_config(ModelConfig, {"name_or_path": model_name, **model_args},
                                              "model arguments (-M)"))
        with nullcontext() if verbose_enabled() else quiet_output():  # loaders' bars and logs (OPCT_VERBOSE=1 keeps them)
            self.model, self.tokenizer, self.renderer = load_spec_for_inference(spec)
        self.spec = spec
        return batch_size

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> ModelOutput:
        # deferred: loads torch and transformers only when called
        from opct.inspect_eval.bridge import CURRENT_SAMPLE

        messages = [{"role": m.role, "content": m.text} for m in input]
        prompt = self.renderer(messages)
        current = CURRENT_SAMPLE.get()
        if current is not None:  # opct's solver: the stream opct eval gives this unit and sample
            key, index, run_seed = current
        else:  # any other solver: a stream keyed by the prompt and the requested seed
            key, index, run_seed = hashlib.sha256(repr(prompt).encode()).hexdigest(), 0, config.seed or 0
        if config.max_tokens is not None and config.max_tokens < 1:
            raise OpctError(f"max_tokens={config.max_tokens}: the longest answer must be at least 1 token")
        params = SamplingParams(
            n=1,
            temperature=0.0 if config.temperature is None else float(config.temperature),
            top_p=1.0 if config.top_p is None else float(config.top_p),
            max_new_tokens=self.max_tokens() if config.max_tokens is None else config.max_tokens,
            seed=0,
        )
        rollout = await self.batcher.submit(_Request(prompt, sample_seed(run_seed, key, index), params))
        text = self.tokenizer.decode(rollout.completion_ids, skip_special_tokens=True)
        output = ModelOutput.from_content(self.model_name, text, stop_reason="max_tokens" if rollout.truncated else "stop")
        n_in, n_out = len(prompt), len(rollout.completion_ids)
        output.usage = ModelUsage(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)
        return output

    async def count_text_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the model's own tokenizer (no download)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    async def tokenize(self, text: str) -> list[int]:
        """``text`` as the model's own token ids."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def max_tokens(self) -> int | None:
        """opct eval's default generation limit."""
        return 512

    def max_connections(self) -> int:
        """Samples in flight at once: the batch size."""
        return self.batcher.max_batch


@modelapi(name="opct")
def opct_provider() -> type[ModelAPI]:
    """The ``opct`` model provider (``--model opct/<model>``)."""
    return OpctModelAPI
