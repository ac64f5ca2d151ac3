"""Batched generation for the organism's check.

Uses the core's ``opct.rollout.HFSampler`` and ``opct.models.render_prompt`` when they are present;
otherwise a small fallback with the same signatures (``model.generate`` on left-padded batches).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

try:  # pragma: no cover - exercised once the core lands on this branch
    from opct.models import render_prompt
    from opct.rollout import HFSampler, Rollout, SamplingParams
except ImportError:

    def render_prompt(tokenizer, messages: list[dict] | str) -> list[int]:
        """Chat template with the generation prompt, as token ids."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    @dataclass
    class SamplingParams:  # type: ignore[no-redef]
        """How to sample; temperature 0 means greedy."""

        n: int = 1
        temperature: float = 1.0
        top_p: float = 1.0
        max_new_tokens: int = 256
        min_new_tokens: int = 0
        seed: int = 0

    @dataclass
    class Rollout:  # type: ignore[no-redef]
        """One sampled completion of one prompt."""

        prompt_index: int
        sample_index: int
        prompt_ids: list[int]
        completion_ids: list[int]
        logprobs: list[float]
        truncated: bool

    class HFSampler:  # type: ignore[no-redef]
        """Batched ``model.generate`` over token-id prompts (prompts of similar length batched together)."""

        def __init__(self, model, tokenizer, batch_size: int = 32):
            self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size

        @torch.no_grad()
        def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Rollout]:
            torch.manual_seed(params.seed)
            eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
            order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
            out: list[Rollout] = []
            per_batch = max(1, self.batch_size // params.n)
            for s in range(0, len(order), per_batch):
                idx = order[s : s + per_batch]
                width = max(len(prompts[i]) for i in idx)
                ids = torch.full((len(idx), width), pad, dtype=torch.long)
                mask = torch.zeros_like(ids)
                for r, i in enumerate(idx):
                    ids[r, width - len(prompts[i]) :] = torch.tensor(prompts[i])
                    mask[r, width - len(prompts[i]) :] = 1
                greedy = params.temperature == 0
                gen = self.model.generate(
                    input_ids=ids, attention_mask=mask, do_sample=not greedy,
                    temperature=None if greedy else params.temperature, top_p=None if greedy else params.top_p,
                    top_k=None, num_return_sequences=params.n, max_new_tokens=params.max_new_tokens,
                    min_new_tokens=params.min_new_tokens, eos_token_id=eos, pad_token_id=pad,
                    output_scores=True, return_dict_in_generate=True,
                )
                steps = torch.stack(gen.scores, dim=1).log_softmax(-1)
                completions = gen.sequences[:, width:]
                for row in range(completions.shape[0]):
                    toks = completions[row].tolist()
                    n_tok = toks.index(eos) + 1 if eos in toks else len(toks)
                    lps = steps[row, torch.arange(n_tok), completions[row, :n_tok]].tolist()
                    i = idx[row // params.n]
                    out.append(Rollout(i, row % params.n, prompts[i], toks[:n_tok], lps, eos not in toks))
            out.sort(key=lambda r: (r.prompt_index, r.sample_index))
            return out


__all__ = ["HFSampler", "Rollout", "SamplingParams", "render_prompt"]
