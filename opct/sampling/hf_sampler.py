"""``HFSampler``: draws completions from a policy as token ids, with the sampler's log-probs, on the model's own forward."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from opct.models import eos_token_ids
from opct.sampling.engine import Rollout, SamplingParams, sample_seed
from opct.sampling.fast_paths import (
    check_once,
    decoder_disagreement,
    largest_difference,
    probe_prompts,
    say_once,
    tolerance,
)
from opct.sampling.kv_cache import BufferedLayer, buffered_cache, cache_kwargs
from opct.sampling.prefix_attention import (
    SharedPrefixLayer,
    attention_modules,
    grouped_rows,
    recording_dispatch,
    shared_prefix_decoding,
    supports_shared_prefix,
)
from opct.sampling.scoring import CompletionBatch, completion_logits, token_logprobs
from opct.sampling.static_decoder import StaticDecoder, why_not_static
from opct.sampling.token_choice import TokenChooser

#: ``sampling.decoder``: ``plain`` decodes with :meth:`HFSampler._decode`'s growing cache, ``static`` with
#: :class:`opct.sampling.static_decoder.StaticDecoder` (after its self-check), ``auto`` with the static one on
#: CUDA only (on a CPU it is not faster and not bit-identical: docs/training.md, "The decoder").
DECODERS = ("auto", "plain", "static")


class HFSampler:
    """Sampling engine on Hugging Face ``generate``: batched, ``n`` samples per prompt, stops at EOS.

    With ``share_prefix`` (the default) a prompt with several samples in a ``generate`` call is
    prefilled once. When the batch holds each prompt's samples side by side in equal numbers and the
    model's attention allows it (:meth:`uses_prefix_attention`), its cached keys and values stay once per
    prompt and decoding reads them once for all its samples; otherwise they are copied to each sample
    before sampling starts. Each of the two is used on a model only once its self-check passed there
    (:mod:`opct.sampling.fast_paths`); otherwise every row encodes its own prompt.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        batch_size: int = 64,
        share_prefix: bool = True,
        decoder: str = "auto",
    ):
        if decoder not in DECODERS:
            raise ValueError(f"unknown decoder {decoder!r}; use one of {', '.join(DECODERS)}")
        self.model = model
        self.decoder = decoder
        self._static: StaticDecoder | None = None
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.share_prefix = share_prefix
        # decode attention reading each shared prompt once (opct/sampling/prefix_attention.py), for SDPA models
        # (the configs allow it; the modules' dispatch and the numbers are checked on first use)
        self.prefix_attention = share_prefix and supports_shared_prefix(model)
        self.eos_ids = eos_token_ids(model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]

    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], params: SamplingParams, sample_keys: list[str] | None = None
    ) -> list[Rollout]:
        """Sample ``params.n`` completions for every prompt; results are ordered by (prompt, sample).

        ``sample_keys`` (one per prompt, e.g. pair ids) make each sample's random stream independent
        of how prompts are batched; by default the prompt's position is its key.
        """
        keys = sample_keys or [str(i) for i in range(len(prompts))]
        jobs = [(p, s) for p in range(len(prompts)) for s in range(params.n)]
        # Similar lengths together: less padding.
        jobs.sort(key=lambda job: len(prompts[job[0]]))
        results: dict[tuple[int, int], Rollout] = {}
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(jobs), self.batch_size):
                chunk = jobs[start : start + self.batch_size]
                seeds = [sample_seed(params.seed, keys[p], s) for p, s in chunk]
                for r in self._generate_batch([prompts[p] for p, _ in chunk], chunk, seeds, params):
                    results[(r.prompt_index, r.sample_index)] = r
        finally:
            self.model.train(was_training)
            self.release_static()
        return [results[(p, s)] for p in range(len(prompts)) for s in range(params.n)]

    def release_static(self) -> None:
        """Free the static decoder's buffers and graphs at the end of a call: a training step's backward then
        never holds a rollout's KV cache (the memory plan counts it in the rollout phase only), at the price of
        one capture per shape per call (two extra decode steps against hundreds)."""
        if self._static is not None:
            self._static.clear()

    @torch.no_grad()
    def generate_seeded(self, prompts: list[list[int]], params: SamplingParams, seeds: list[int]) -> list[Rollout]:
        """One completion per prompt, row ``i`` drawn from a generator seeded with ``seeds[i]`` (``params.n``
        and ``params.seed`` are not used). ``generate`` is this with ``seeds = sample_seed(seed, key, s)``,
        so a caller that knows a sample's key and index reproduces its tokens exactly."""
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        results: dict[int, Rollout] = {}
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                jobs = [(i, 0) for i in chunk]
                for r in self._generate_batch([prompts[i] for i in chunk], jobs, [seeds[i] for i in chunk], params):
                    results[r.prompt_index] = r
        finally:
            self.model.train(was_training)
        return [results[i] for i in range(len(prompts))]

    def _generate_batch(
        self,
        batch_prompts: list[list[int]],
        jobs: list[tuple[int, int]],
        seeds: list[int],
        params: SamplingParams,
        fast: tuple[bool, bool] | None = None,
        static: bool | None = None,
    ) -> list[Rollout]:
        """Sample one completion per row; ``fast``: (prefill each prompt once, decode with shared-prefix
        attention), ``static``: decode with the static decoder; by default those whose self-checks passed."""
        device = next(self.model.parameters()).device
        width = max(len(p) for p in batch_prompts)
        input_ids = torch.full((len(batch_prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(batch_prompts), width), dtype=torch.long)
        for i, p in enumerate(batch_prompts):
            input_ids[i, width - len(p) :] = torch.tensor(p)
            attention[i, width - len(p) :] = 1
        generators = [torch.Generator().manual_seed(seed) for seed in seeds]
        chooser = TokenChooser(params, generators, self.eos_ids)
        input_ids, attention = input_ids.to(device), attention.to(device)
        if static is None:
            static = self.uses_static_decoder(device)
        if fast is None:
            fast = (self.shares_prefill(), not static and self.uses_prefix_attention(device))
        # the static decoder copies the encoded prompts into its own cache: this one holds only them
        cache = buffered_cache(self.model.config, width + (0 if static else params.max_new_tokens))
        if fast[0]:
            self._prefill_shared(cache, input_ids, attention, [p for p, _ in jobs], fast[1])
        if any(isinstance(layer, SharedPrefixLayer) for layer in cache.layers):
            with shared_prefix_decoding(self.model, cache):
                self._decode(input_ids, attention, cache, chooser, params.max_new_tokens)
        else:
            self._decode(input_ids, attention, cache, chooser, params.max_new_tokens, static)
        tokens = torch.stack(chooser.tokens, dim=1).cpu()
        logprobs = torch.stack(chooser.logprobs, dim=1).cpu()
        eos = set(self.eos_ids)
        out = []
        for row, (p, s) in enumerate(jobs):
            ids = tokens[row].tolist()
            end = next((t + 1 for t, tok in enumerate(ids) if tok in eos), None)
            completion = ids[:end] if end is not None else ids[: params.max_new_tokens]
            out.append(
                Rollout(
                    prompt_index=p,
                    sample_index=s,
                    prompt_ids=list(batch_prompts[row]),
                    completion_ids=completion,
                    logprobs=logprobs[row, : len(completion)].tolist(),
                    truncated=end is None,
                )
            )
        return out

    def _decode(
        self, input_ids: torch.Tensor, attention: torch.Tensor, cache: DynamicCache, chooser: TokenChooser, steps: int,
        static: bool = False,
    ) -> None:
        """Decode up to ``steps`` tokens for every row of the left-padded batch, calling the model's
        forward directly (never ``generate``, whose defaults come from the model's generation config).

        ``cache`` may already hold the first prompt positions (:meth:`_prefill_shared`); only the rest
        is encoded. Rows that emitted an end-of-sequence token keep decoding padding until all have.
        With ``static`` the tokens after the first are decoded by :class:`StaticDecoder`.
        """
        rows = input_ids.shape[0]
        positions = (attention.cumsum(-1) - 1).clamp(min=0)  # [rows, width]
        cached = cache.get_seq_length()
        out = self.model(
            input_ids=input_ids[:, cached:],
            attention_mask=attention,
            position_ids=positions[:, cached:],
            **cache_kwargs(self.model, cache),
            use_cache=True,
            logits_to_keep=1,
        )
        next_position = positions[:, -1:] + 1  # [rows, 1]
        if static:
            self.static_decoder().decode(cache, attention, out.logits[:, -1, :], next_position, chooser, steps)
            return
        eos = torch.tensor(self.eos_ids, device=input_ids.device)
        done = torch.zeros(rows, dtype=torch.bool, device=input_ids.device)
        for step in range(steps):
            token = chooser(out.logits[:, -1, :], step)  # [rows]
            token = torch.where(done, torch.full_like(token, self.pad_id), token)
            done = done | torch.isin(token, eos)
            if step == steps - 1 or bool(done.all()):
                return
            attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=1)
            out = self.model(
                input_ids=token[:, None],
                attention_mask=attention,
                position_ids=next_position,
                **cache_kwargs(self.model, cache),
                use_cache=True,
            )
            next_position = next_position + 1

    def static_decoder(self) -> StaticDecoder:
        """This sampler's :class:`StaticDecoder` (made on first use), capturing CUDA graphs on a CUDA model;
        a failed capture is said once (:func:`opct.sampling.fast_paths.say_once`) and its steps run eagerly."""
        if self._static is None:
            cuda = next(self.model.parameters()).device.type == "cuda"
            self._static = StaticDecoder(
                self.model, self.pad_id, self.eos_ids, use_graphs=cuda,
                on_graph_failure=lambda why: say_once(self.model, "CUDA graph decoding", why,
                                                      "the static decoder's steps run eagerly"))
        return self._static

    def uses_static_decoder(self, device: torch.device) -> bool:
        """Whether decoding on ``device`` uses the static decoder: ``decoder`` is ``static``, or ``auto`` on CUDA,
        and its self-check (:meth:`_check_static`, once per model) passed."""
        if self.decoder == "plain" or (self.decoder == "auto" and device.type != "cuda"):
            return False
        return check_once(self.model, "static decoder", self._check_static, "it decodes with the plain decoder")

    @torch.no_grad()
    def _check_static(self) -> str | None:
        """``None`` when the static decoder passes the decoder rule (:func:`fast_paths.decoder_disagreement`)
        on two random prompts, two samples each, against the plain decoder; else why not."""
        if (reason := why_not_static(self.model)) is not None:
            return reason
        prompts = probe_prompts(self.model)
        with self._eval_mode():
            try:
                runs = [self._probe_rollouts(prompts, 6, fast=(self.shares_prefill(), False), static=static)
                        for static in (False, True)]
                deviations = [self._trainer_deviation(prompts, rollouts) for rollouts in runs]
            finally:
                self.static_decoder().clear()
        return decoder_disagreement(self.model, runs[0], runs[1], deviations[0], deviations[1])

    def _probe_rollouts(self, prompts: list[list[int]], max_new_tokens: int, fast: tuple[bool, bool],
                        static: bool) -> list[Rollout]:
        """The self-checks' rollouts: two samples of each probe prompt at temperature 1 (seed 0)."""
        jobs = [(p, s) for p in range(len(prompts)) for s in range(2)]
        params = SamplingParams(n=2, temperature=1.0, max_new_tokens=max_new_tokens, seed=0)
        return self._generate_batch([prompts[p] for p, _ in jobs], jobs, list(range(len(jobs))), params,
                                    fast=fast, static=static)

    @contextmanager
    def _eval_mode(self) -> Iterator[None]:
        """The model in eval mode for a self-check (sampling and the trainer's forward), its mode restored after."""
        was_training = self.model.training
        self.model.eval()
        try:
            yield
        finally:
            self.model.train(was_training)

    def _trainer_deviation(self, prompts: list[list[int]], rollouts: list[Rollout]) -> float:
        """The largest |recorded - trainer's| log-prob over ``rollouts``' tokens, the trainer's being the plain
        full-sequence forward (:func:`opct.sampling.scoring.completion_logits` without a shared prefix)."""
        batch = CompletionBatch(prompts, [r.completion_ids for r in rollouts], [r.prompt_index for r in rollouts])
        targets, mask = batch.targets_and_mask(next(self.model.parameters()).device)
        trainer = token_logprobs(completion_logits(self.model, batch, self.pad_id, share_prefix=False), targets)
        recorded = torch.zeros_like(trainer)
        for i, r in enumerate(rollouts):
            recorded[i, : len(r.logprobs)] = torch.tensor(r.logprobs)
        return largest_difference(recorded, trainer, mask)

    def uses_prefix_attention(self, device: torch.device) -> bool:
        """Whether decoding on ``device`` reads shared prompts once (:mod:`opct.sampling.prefix_attention`).

        CPU only: measured there (memory-bound decoding; the step bench went from 4.17-4.37 to 4.04-4.13 s);
        on a GPU, unmeasured, the per-row cache and the model's fused SDPA kernel stay. And only for a model
        whose configs allow it and whose self-check passed (:meth:`_check_fast_path`, once per model).
        """
        if not (self.prefix_attention and device.type == "cpu" and self.shares_prefill()):
            return False
        return check_once(self.model, "shared-prefix decode attention", lambda: self._check_fast_path(True),
                          "each sample decodes against its own copy of the prompt's cache")

    def shares_prefill(self) -> bool:
        """Whether a prompt's samples share one prefill: ``share_prefix``, and its self-check passed on this model."""
        return self.share_prefix and check_once(self.model, "shared prompt prefill", lambda: self._check_fast_path(False),
                                                "each sample encodes its own prompt")

    @torch.no_grad()
    def _check_fast_path(self, prefix_attention: bool) -> str | None:
        """``None`` when sampling with the fast path (shared prefill, and shared-prefix attention if
        ``prefix_attention``) records the plain forward's log-probs on two random prompts, two samples each,
        and every attention module called :func:`opct.sampling.prefix_attention.shared_prefix_attention`;
        else why not."""
        prompts = probe_prompts(self.model)
        with self._eval_mode():
            with recording_dispatch() as called:
                rollouts = self._probe_rollouts(prompts, 4, fast=(True, prefix_attention), static=False)
            modules = attention_modules(self.model)
            missing = [m for m in modules if id(m) not in called]
            if prefix_attention and missing:
                return (f"{len(missing)} of {len(modules)} attention modules ({type(missing[0]).__name__}) do not "
                        "dispatch through transformers' attention interface")
            diff, tol = self._trainer_deviation(prompts, rollouts), tolerance(self.model)
        return None if diff <= tol else f"its log-probs differ from the plain forward's by {diff:.1e} > {tol:.0e}"

    def _prefill_shared(
        self, cache: DynamicCache, input_ids: torch.Tensor, attention: torch.Tensor, prompt_of_row: list[int],
        prefix_attention: bool,
    ) -> None:
        """Fill ``cache`` with all but the last prompt position, computing each distinct prompt once.

        Rows are the (left-padded) batch to decode; rows with the same prompt index hold the same
        ids. Nothing is done when no prompt repeats; otherwise :meth:`_decode` finds the prompt cached
        and only runs its last position for each row before sampling.
        """
        first: dict[int, int] = {}
        for row, p in enumerate(prompt_of_row):
            first.setdefault(p, row)
        if len(first) == len(prompt_of_row) or input_ids.shape[1] < 2:
            return
        rows = torch.tensor(list(first.values()), device=input_ids.device)
        ids, mask = input_ids[rows, :-1], attention[rows, :-1]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1,
            **cache_kwargs(self.model, cache),
        )
        group = grouped_rows(prompt_of_row) if prefix_attention else None
        if group is not None and all(type(layer) is BufferedLayer for layer in cache.layers):
            # each prompt's keys stay once; its samples' generated keys go to a buffer per row
            cache.layers = [
                SharedPrefixLayer(layer.keys, layer.values, mask, group, layer.capacity - layer.keys.shape[-2])
                for layer in cache.layers
            ]
            return
        slot = {p: i for i, p in enumerate(first)}
        cache.batch_select_indices(torch.tensor([slot[p] for p in prompt_of_row], device=input_ids.device))
