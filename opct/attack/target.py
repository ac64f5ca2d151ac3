"""The model under attack: prompts in, greedy responses out, batched."""

from __future__ import annotations

from typing import Any

from opct.config import GenerationConfig
from opct.models import render_prompt
from opct.rollout import HFSampler, SamplingParams


class HFTarget:
    """A Hugging Face model answering single-turn user prompts (``generation``: greedy, 256 tokens by default)."""

    def __init__(self, model: Any, tokenizer: Any, generation: GenerationConfig | None = None, system: str | None = None):
        gen = generation or GenerationConfig(max_new_tokens=256)
        self.engine = HFSampler(model, tokenizer, batch_size=gen.sequences_per_call)
        self.tokenizer = tokenizer
        self.params = SamplingParams.from_config(gen, seed=0)
        self.system = system

    def __call__(self, prompts: list[str]) -> list[str]:
        msgs = [[{"role": "system", "content": self.system}] if self.system else [] for _ in prompts]
        ids = [render_prompt(self.tokenizer, [*m, {"role": "user", "content": p}]) for m, p in zip(msgs, prompts, strict=True)]
        rollouts = self.engine.generate(ids, self.params)
        return [self.tokenizer.decode(r.completion_ids, skip_special_tokens=True) for r in rollouts]
