"""The model under attack: prompts in, greedy responses out, batched."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opct.attack.search import Reply
from opct.config import GenerationConfig
from opct.models import render_prompt
from opct.sampling.engine import SamplingParams
from opct.sampling.hf_sampler import HFSampler


class HFTarget:
    """A Hugging Face model answering single-turn user prompts (``generation``: greedy, 256 tokens by default)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        generation: GenerationConfig | None = None,
        renderer: Callable[[list[dict[str, str]]], list[int]] | None = None,
    ):
        """``renderer``: the model spec's :class:`opct.models.PromptRenderer` (its template kwargs and
        system prompt); by default the tokenizer's plain chat template."""
        gen = generation or GenerationConfig(max_new_tokens=256)
        self.engine = HFSampler(model, tokenizer, batch_size=gen.sequences_per_call)
        self.tokenizer = tokenizer
        self.params = SamplingParams.from_config(gen, seed=0)
        self.render = renderer or (lambda messages: render_prompt(tokenizer, messages))

    def __call__(self, prompts: list[str]) -> list[str]:
        """One :class:`~opct.attack.search.Reply` per prompt (``truncated`` when cut off at ``max_new_tokens``)."""
        ids = [self.render([{"role": "user", "content": p}]) for p in prompts]
        rollouts = self.engine.generate(ids, self.params)
        return [Reply(self.tokenizer.decode(r.completion_ids, skip_special_tokens=True), r.truncated) for r in rollouts]
