r"""Validation while training: what recipe selection reads, measured on pairs never trained on.

With ``validation.every`` set, the loop measures the policy on the validation pairs
(``data.validation``, e.g. ``organism:sycophancy:val``) once before the first step and then every
``every`` steps, into ``validation.jsonl`` (one record per measurement) and the step's
``metrics.jsonl`` record (``val_*`` keys). The measurement is the same for every method: it never
uses the method's own loss.

* ``val_teacher_kl``: for the student's own samples :math:`y \sim \pi_\theta(\cdot \mid x)` of each
  validation prompt ``x`` (``validation.samples``, temperature 1), the whole-vocabulary reverse KL
  per completion token,

  .. math::

      \frac{1}{\sum_i |y_i|} \sum_i \sum_t \mathrm{KL}\big(\pi_\theta(\cdot \mid x_i, y_{i,<t})
      \,\big\|\, \pi_{\text{teacher}}(\cdot \mid x'_i, y_{i,<t})\big)

  with ``x'`` the pair's ``teacher_prompt`` and the teacher the frozen run-start model. It is 0 when
  the student on the cued prompt behaves exactly as the teacher does on the clean one.
* ``val_entropy``, ``val_completion_len`` and ``val_truncation_rate`` of those samples.
* ``val_good/<axis>`` (with ``val_scored/<axis>``): the share of the student's greedy answers
  (``validation.answers``) that a registered judge (``validation.judge``,
  :data:`~opct.training.plugins.VALIDATION_JUDGES`) finds doing what the teacher would; unscored answers (empty,
  unreadable) are left out of the share and counted. ``val_good`` is the mean over axes.
* ``famval_good/<axis>`` (with ``famval_scored/<axis>``, ``famval_unscored/<axis>``) and ``famval_good``:
  the same judged rate on the *family validation* pairs (a ``meta.split`` of ``famval``: whole
  perturbation families held back from training, e.g. ``organism:<axis>:famval``), apart from the
  ``val_*`` keys, which are measured on the other validation pairs alone (teacher-KL included).
* ``val_cap/<task>``: greedy accuracies of a registered capability probe (``validation.capability``,
  :data:`~opct.training.plugins.CAPABILITY_PROBES`) on items the evaluation never asks.

Every measurement draws the same samples' random streams (fixed seeds per pair), so what changes
between two of them is the policy alone. Validation runs in one process (it is refused with more).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

from opct.config import RunConfig
from opct.methods.base import TrainContext, rollout_microbatches, score_pair
from opct.pairs import ConsistencyPair, is_family_validation_split, is_heldout_split, load_pair_source
from opct.sampling.engine import SamplingParams
from opct.sampling.scoring import reverse_kl_sum
from opct.training.plugins import CAPABILITY_PROBES, VALIDATION_JUDGES

#: The seed of every validation measurement's samples (the same draws each time).
VALIDATION_SEED = 20_261_125


def load_validation_pairs(cfg: RunConfig) -> list[ConsistencyPair]:
    """The validation pairs, a seeded sample of at most ``validation.pairs_per_axis`` per axis (and as
    many again of its family validation pairs, :func:`opct.pairs.is_family_validation_split`).

    Refused: a validation pair that is also a training pair (same id), or one from a held-out split.
    """
    pairs: list[ConsistencyPair] = []
    for source in cfg.data.validation:
        pairs.extend(load_pair_source(source, columns=cfg.data.columns or None, split=None))
    heldout = [p for p in pairs if is_heldout_split(str(p.meta.get("split", "")))]
    if heldout:
        raise ValueError(
            f"{len(heldout)} validation pairs are held-out pairs (meta.split: heldout; first: {heldout[0].id!r}): "
            "held-out data is for the final evaluation only and never chooses a recipe"
        )
    by_axis: dict[tuple[bool, str], list[ConsistencyPair]] = defaultdict(list)
    for p in pairs:
        by_axis[(is_family_validation_split(str(p.meta.get("split", ""))), p.axis or "")].append(p)
    chosen: list[ConsistencyPair] = []
    for family, axis in sorted(by_axis):
        group = by_axis[(family, axis)]
        if len(group) > cfg.validation.pairs_per_axis:
            seed = f"famval-{axis}" if family else f"validation-{axis}"
            group = random.Random(seed).sample(group, cfg.validation.pairs_per_axis)
        chosen.extend(group)
    return chosen


def check_disjoint(train: list[ConsistencyPair], validation: list[ConsistencyPair]) -> None:
    """Refuse validation pairs that are training pairs too."""
    shared = {p.id for p in train} & {p.id for p in validation}
    if shared:
        raise ValueError(
            f"{len(shared)} pairs are in both data.train and data.validation (e.g. {sorted(shared)[0]!r}): "
            "a recipe chosen on pairs it trained on is chosen on nothing"
        )


class Validator:
    """Measures the policy of ``ctx`` on ``pairs`` (see the module docstring)."""

    def __init__(self, ctx: TrainContext, pairs: list[ConsistencyPair]) -> None:
        if ctx.accelerator.num_processes > 1:
            raise ValueError("validation.every runs in one process; launch one process or set validation.every: null")
        if not pairs:
            raise ValueError("validation.every is set but data.validation gives no pairs")
        self.ctx, self.pairs = ctx, pairs
        self.family = [is_family_validation_split(str(p.meta.get("split", ""))) for p in pairs]
        #: the pairs teacher-KL is measured on: the validation pairs of the training families (all, when there are none)
        self.kl_pairs = [p for p, fam in zip(pairs, self.family, strict=True) if not fam] or pairs
        settings = ctx.cfg.validation
        self.judge = VALIDATION_JUDGES.get(settings.judge) if settings.judge else None
        self.probe = CAPABILITY_PROBES.get(settings.capability) if settings.capability else None
        self._sampler: Any = None

    def _engine(self) -> Any:
        if self._sampler is None:
            self._sampler = self.ctx.sampler(self.ctx.cfg.validation.samples, self.ctx.policy)
        return self._sampler

    def measure(self, step: int) -> dict[str, float | int]:
        """One measurement of the current policy, as a ``validation.jsonl`` record."""
        ctx = self.ctx
        was_training = ctx.model.training
        ctx.model.eval()
        try:
            with torch.no_grad():
                record: dict[str, float | int] = {"step": step}
                record.update(self._teacher_kl())
                if self.judge is not None:
                    record.update(self._behaviour())
                if self.probe is not None:
                    scores = self.probe(self.answer)
                    record.update({f"val_cap/{task}": float(acc) for task, acc in scores.items()})
                return record
        finally:
            ctx.model.train(was_training)

    def _teacher_kl(self) -> dict[str, float]:
        ctx, gen = self.ctx, self.ctx.cfg.validation.samples
        params = SamplingParams.from_config(gen, seed=VALIDATION_SEED)
        rollouts = ctx.sample(self._engine(), self.kl_pairs, params)
        kl = entropy = tokens = 0.0
        for mb in rollout_microbatches(self.kl_pairs, rollouts, ctx.cfg.train.sequences_per_microbatch):
            s = score_pair(ctx, mb, reference_side="teacher_prompt", keep_logits=True)
            kl += reverse_kl_sum(s.student_logits, s.reference_logits, s.mask, ctx.cfg.train.logprob_chunk_positions)
            entropy += s.entropy_sum
            tokens += float(s.mask.sum())
        per = max(tokens, 1.0)
        return {
            "val_teacher_kl": kl / per,
            "val_entropy": entropy / per,
            "val_completion_len": tokens / max(len(rollouts), 1),
            "val_truncation_rate": sum(r.truncated for r in rollouts) / max(len(rollouts), 1),
        }

    def answer(self, prompts: list[list[dict[str, str]]]) -> list[str]:
        """Greedy answers (``validation.answers``) of the current policy to chat prompts, as text."""
        ctx, gen = self.ctx, self.ctx.cfg.validation.answers
        params = SamplingParams.from_config(gen, seed=VALIDATION_SEED)
        engine = self._engine()
        with ctx.accelerator.autocast(), ctx.generating(ctx.policy):
            rollouts = engine.generate([ctx.render(p) for p in prompts], params,
                                       sample_keys=[f"validation-{i}" for i in range(len(prompts))])
        return [ctx.tokenizer.decode(r.completion_ids, skip_special_tokens=True) for r in rollouts]

    def _behaviour(self) -> dict[str, float | int]:
        assert self.judge is not None
        answers = self.answer([p.prompt for p in self.pairs])
        by_axis: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, p in enumerate(self.pairs):
            by_axis[("famval" if self.family[i] else "val", p.axis or "")].append(i)
        out: dict[str, float | int] = {}
        rates: dict[str, list[float]] = defaultdict(list)
        for (prefix, axis), rows in sorted(by_axis.items()):
            verdicts = self.judge(axis, [self.pairs[i].meta for i in rows], [answers[i] for i in rows])
            scored = [v for v in verdicts if v is not None]
            rate = sum(scored) / len(scored) if scored else math.nan
            out[f"{prefix}_good/{axis}"] = rate
            out[f"{prefix}_scored/{axis}"] = len(scored)
            out[f"{prefix}_unscored/{axis}"] = len(verdicts) - len(scored)
            rates[prefix].append(rate)
        for prefix, values in rates.items():
            out[f"{prefix}_good"] = sum(values) / len(values) if not any(math.isnan(r) for r in values) else math.nan
        return out


def judge_microbatches(judge: Callable[..., list[bool | None]], micro: list[Any], tokenizer: Any) -> dict[str, float]:
    """The judged good-behaviour rate of a step's rollouts per axis (``rollout_good/<axis>``: the share of
    scored rollouts that do what the teacher would; axes with nothing scored are left out)."""
    good: dict[str, list[bool]] = defaultdict(list)
    for mb in micro:
        texts = [tokenizer.decode(c, skip_special_tokens=True) for c in mb.completions]
        by_axis: dict[str, list[int]] = defaultdict(list)
        for j, i in enumerate(mb.pair_of):
            by_axis[mb.pairs[i].axis or ""].append(j)
        for axis, rows in by_axis.items():
            verdicts = judge(axis, [mb.pairs[mb.pair_of[j]].meta for j in rows], [texts[j] for j in rows])
            good[axis].extend(v for v in verdicts if v is not None)
    return {f"rollout_good/{axis}": sum(v) / len(v) for axis, v in sorted(good.items()) if v}
