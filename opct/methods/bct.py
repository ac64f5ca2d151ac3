"""SFT consistency (BCT): fine-tune on (``prompt`` -> the frozen model's response to ``teacher_prompt``).

The targets are generated once, offline, by the frozen run-start model (``bct.targets`` settings,
greedy by default, ``bct.targets.per_axis`` for an axis of its own: the official code samples the
safety-awareness targets, 3 at temperature 1) and cached in the run directory; every target is one SFT
example, and the loss is the negative log-likelihood of the target tokens after ``prompt`` (completion
tokens only).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar

import torch
from accelerate.utils import gather_object
from pydantic import Field

from opct.config import StrictSettings, TargetSettings
from opct.methods.base import (
    ENTROPY_STATS,
    Microbatch,
    TrainContext,
    score_pair,
    split_microbatches,
)
from opct.models import eos_token_ids
from opct.pairs import ConsistencyPair
from opct.runs.layout import RunLayout
from opct.sampling.engine import SamplingParams


class BCTConfig(StrictSettings):
    """``method: bct`` (SFT consistency): targets are the frozen model's responses to ``teacher_prompt``, made once."""

    targets: TargetSettings = Field(description="n = responses per pair")


class BCTMethod:
    """Targets are generated once, offline, by the frozen run-start model, and cached in the run directory."""

    name: ClassVar[str] = "bct"
    config_class: ClassVar[type[BCTConfig]] = BCTConfig
    stats: ClassVar[dict[str, tuple[str, str]]] = ENTROPY_STATS
    logs_rollouts: ClassVar[bool] = False
    #: The frozen model's targets are generated once, up front; no teacher pass while training.
    compute: ClassVar[dict[str, str]] = {"generated": "cached", "teacher_scored": "none"}

    def __init__(self, ctx: TrainContext):
        self.ctx = ctx
        self.settings: BCTConfig = ctx.cfg.method_config
        self.targets: dict[str, list[list[int]]] = {}

    def cache_key(self, pairs: list[ConsistencyPair]) -> str:
        """Hash of (teacher identity, teacher prompts as rendered ids, generation settings, seed)."""
        h = hashlib.sha256()
        h.update(self.ctx.teacher.fingerprint.encode())
        h.update(json.dumps(self._target_settings(), sort_keys=True).encode())
        h.update(str(self.ctx.cfg.seed).encode())
        for p in pairs:
            h.update(p.id.encode())
            h.update(json.dumps(self.ctx.render(p.teacher_prompt)).encode())
        return h.hexdigest()[:16]

    def _target_settings(self) -> dict[str, Any]:
        """The settings that decide the targets: not the memory ones, ``engine`` only when it is not ``hf`` and
        ``decoder`` only when it is not ``auto`` (so a cache made before either was a setting keeps its key)."""
        settings = self.settings.targets.model_dump(exclude={"sequences_per_call"})
        settings = {k: v for k, v in settings.items() if not k.startswith("vllm_")}
        if settings["engine"] == "hf":
            del settings["engine"]
        if settings["decoder"] == "auto":
            del settings["decoder"]  # likewise for the decoder (opct.sampling.hf_sampler.DECODERS)
        if not settings["per_axis"]:
            del settings["per_axis"]  # so a cache made before per-axis settings existed keeps its key
        return settings

    def setup(self, pairs: list[ConsistencyPair]) -> None:
        acc = self.ctx.accelerator
        layout = RunLayout(self.ctx.run_dir)
        path = layout.cache(self.name) / f"{self.cache_key(pairs)}.jsonl"
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
        """Each pair's targets, ``n`` of them at its axis's settings (``bct.targets`` with ``per_axis``'s
        keys). A sample's random stream is keyed by its pair id, so grouping by axis changes no target."""
        targets = self.settings.targets
        acc = self.ctx.accelerator
        local: list[tuple[str, list[list[int]]]] = []
        with (acc.split_between_processes(pairs) as mine, self.ctx.teacher.active() as teacher,
              self.ctx.generating(teacher), acc.autocast()):
            # engine: vllm loads the run-start weights from the model spec: the teacher's own
            sampler = self.ctx.sampler(targets, teacher)
            try:
                groups: dict[str, list[ConsistencyPair]] = {}
                for p in mine:
                    groups.setdefault(json.dumps(targets.for_axis(p.axis).model_dump(), sort_keys=True), []).append(p)
                for group in groups.values():
                    gen = targets.for_axis(group[0].axis)
                    rollouts = sampler.generate([self.ctx.render(p.teacher_prompt) for p in group],
                                                SamplingParams.from_config(gen, seed=self.ctx.cfg.seed),
                                                sample_keys=[p.id for p in group])
                    local += [(p.id, [r.completion_ids for r in rollouts[i * gen.n : (i + 1) * gen.n]])
                              for i, p in enumerate(group)]
            finally:
                if hasattr(sampler, "close"):
                    sampler.close()  # a vLLM engine's memory goes back to training
        merged = gather_object(local) if acc.num_processes > 1 else local
        return dict(merged)

    def prepare(self, pairs: list[ConsistencyPair], step: int) -> list[Microbatch]:
        completions, pair_of = [], []
        for i, p in enumerate(pairs):
            for target in self.targets[p.id]:
                completions.append(target)
                pair_of.append(i)
        truncated = [self.is_truncated(c) for c in completions]
        return split_microbatches(
            pairs, completions, pair_of, self.ctx.cfg.train.sequences_per_microbatch, truncated=truncated
        )

    def is_truncated(self, target: list[int]) -> bool:
        """Whether a target stopped at ``bct.targets.max_new_tokens`` rather than at an end-of-sequence
        token (a completion keeps its EOS when the model emitted one)."""
        if not hasattr(self, "_eos"):
            self._eos = set(eos_token_ids(self.ctx.policy, self.ctx.tokenizer))
        return len(target) >= self.settings.targets.max_new_tokens and (not target or target[-1] not in self._eos)

    def loss(self, mb: Microbatch) -> tuple[torch.Tensor, dict[str, float]]:
        s = score_pair(self.ctx, mb)  # s.student_lp: [sequences, completion_len], 0 past each target's end
        truncated = float(sum(mb.truncated or []))
        return -s.student_lp.sum(), {"sequences": float(len(mb.completions)), "truncated": truncated,
                                     "entropy_sum": s.entropy_sum}
