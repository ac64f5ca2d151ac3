"""SFT consistency (BCT): fine-tune on (``prompt`` -> the frozen model's response to ``teacher_prompt``)."""

from __future__ import annotations

import hashlib
import json

import torch
from accelerate.utils import gather_object

from opct.methods.base import Microbatch, TrainContext, split_microbatches
from opct.pairs import ConsistencyPair
from opct.rollout import HFSampler, SamplingParams
from opct.scoring import CompletionBatch, completion_logits, token_logprobs


class BCTMethod:
    """Targets are generated once, offline, by the frozen run-start model, and cached in the run directory."""

    name = "bct"

    def __init__(self, ctx: TrainContext):
        self.ctx = ctx
        self.targets: dict[str, list[list[int]]] = {}

    def cache_key(self, pairs: list[ConsistencyPair]) -> str:
        """Hash of (teacher identity, teacher prompts as rendered ids, generation settings, seed)."""
        h = hashlib.sha256()
        h.update(self.ctx.teacher.fingerprint.encode())
        h.update(json.dumps(self.ctx.cfg.bct.model_dump(), sort_keys=True).encode())
        h.update(str(self.ctx.cfg.seed).encode())
        for p in pairs:
            h.update(p.id.encode())
            h.update(json.dumps(self.ctx.render(p.teacher_prompt)).encode())
        return h.hexdigest()[:16]

    def setup(self, pairs: list[ConsistencyPair]) -> None:
        acc = self.ctx.accelerator
        path = self.ctx.run_dir / "bct_targets" / f"{self.cache_key(pairs)}.jsonl"
        if not path.exists():
            generated = self._generate(pairs)
            if acc.is_main_process:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                with tmp.open("w", encoding="utf-8") as fh:
                    for pid, seqs in generated.items():
                        fh.write(json.dumps({"id": pid, "targets": seqs}) + "\n")
                tmp.replace(path)
            acc.wait_for_everyone()
        with path.open(encoding="utf-8") as fh:
            self.targets = {row["id"]: row["targets"] for row in map(json.loads, fh)}
        self.cache_path = path

    def _generate(self, pairs: list[ConsistencyPair]) -> dict[str, list[list[int]]]:
        b = self.ctx.cfg.bct
        params = SamplingParams(
            n=b.num_targets, temperature=b.temperature, top_p=b.top_p, max_new_tokens=b.max_new_tokens, seed=self.ctx.cfg.seed
        )
        acc = self.ctx.accelerator
        with acc.split_between_processes(pairs) as mine:
            with self.ctx.teacher.active() as teacher:
                sampler = HFSampler(teacher, self.ctx.tokenizer, batch_size=b.batch_size)
                rollouts = sampler.generate(
                    [self.ctx.render(p.teacher_prompt) for p in mine], params, sample_keys=[p.id for p in mine]
                )
            local: list[tuple[str, list[list[int]]]] = [
                (p.id, [r.completion_ids for r in rollouts[i * b.num_targets : (i + 1) * b.num_targets]])
                for i, p in enumerate(mine)
            ]
        merged = gather_object(local) if acc.num_processes > 1 else local
        return dict(merged)

    def prepare(self, pairs: list[ConsistencyPair], step: int) -> list[Microbatch]:
        completions, pair_of = [], []
        for i, p in enumerate(pairs):
            for target in self.targets[p.id]:
                completions.append(target)
                pair_of.append(i)
        return split_microbatches(pairs, completions, pair_of, self.ctx.cfg.train.micro_batch_size)

    def loss(self, mb: Microbatch) -> tuple[torch.Tensor, dict[str, float]]:
        ctx = self.ctx
        batch = CompletionBatch(
            prompts=[ctx.render(p.prompt) for p in mb.pairs], completions=mb.completions, prompt_of=mb.pair_of
        )
        logits = completion_logits(ctx.model, batch, ctx.pad_id, ctx.cfg.train.share_prompt_prefix)
        targets, mask = batch.targets_and_mask(logits.device)
        lp = token_logprobs(logits, targets, ctx.cfg.loss.chunk_size) * mask
        return -lp.sum(), {"sequences": float(len(mb.completions)), "truncated": 0.0}
