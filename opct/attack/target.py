"""The model under attack: prompts in, greedy responses out, batched."""

from __future__ import annotations

from typing import Any

from opct.models import render_prompt
from opct.rollout import HFSampler, SamplingParams


class HFTarget:
    """A Hugging Face model answering single-turn user prompts (greedy by default)."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int = 256, batch_size: int = 64, system: str | None = None):
        self.engine = HFSampler(model, tokenizer, batch_size=batch_size)
        self.tokenizer = tokenizer
        self.params = SamplingParams(n=1, temperature=0.0, max_new_tokens=max_new_tokens)
        self.system = system

    def __call__(self, prompts: list[str]) -> list[str]:
        msgs = [[{"role": "system", "content": self.system}] if self.system else [] for _ in prompts]
        ids = [render_prompt(self.tokenizer, [*m, {"role": "user", "content": p}]) for m, p in zip(msgs, prompts, strict=True)]
        rollouts = self.engine.generate(ids, self.params)
        return [self.tokenizer.decode(r.completion_ids, skip_special_tokens=True) for r in rollouts]
