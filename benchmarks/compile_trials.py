r"""Does a compiled or static-cache decode step make the organism's generation faster, and does it keep the log-probs?

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/compile_trials.py [--rows 48] [--context 64] [--steps 24]
        [--variants eager-dynamic,eager-static,compiled-static] [--out FILE]

Each variant prefills the same ``--rows`` random prompts of ``--context`` tokens on the shipped organism,
then decodes the same ``--steps`` fixed tokens one forward at a time (teacher-forced, so every variant
sees exactly the same inputs), on one CPU thread. The variants take turns within each step, in a
rotating order, so that a change of load on shared cores falls on all of them alike:

- ``eager-dynamic``: what opct does today (``DynamicCache``, eager PyTorch);
- ``eager-static``: a preallocated ``StaticCache``, eager;
- ``compiled-static``: the ``StaticCache`` step under ``torch.compile`` (inductor, fixed shapes);
- ``compiled-dynamic``: ``DynamicCache`` under ``torch.compile(dynamic=True)``.

Reported per variant: the median decode forward (after the first ``--warmup`` steps), its ratio to
``eager-dynamic`` (above 1: faster), the first forward's time (for a compiled variant, mostly the
compilation that every new process and every new shape pays again) and the largest difference of any
next-token log-prob from ``eager-dynamic``'s (0 means the same log-probs bit for bit). opct's rule
for a fast path is that it gives the plain forward's log-probs, so a variant with a difference is a
trade, not a free speed-up; ``docs/development.md`` says what was measured and what was kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VARIANTS = ("eager-dynamic", "eager-static", "compiled-static", "compiled-dynamic")
REFERENCE = "eager-dynamic"


@dataclass
class Trial:
    """One variant's measurement."""

    variant: str
    median_ms: float
    first_forward_s: float
    max_abs_logprob_diff: float = 0.0
    speedup: float = 1.0


def parse_variants(text: str) -> list[str]:
    """The variants named in ``text`` (comma-separated), the reference first; unknown names are an error."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    return [REFERENCE, *[v for v in dict.fromkeys(names) if v != REFERENCE]]


def compare(trials: list[Trial], logprobs: dict[str, Any]) -> list[Trial]:
    """Fill each trial's speed-up over the reference and its largest log-prob difference from it."""
    ref = next(t for t in trials if t.variant == REFERENCE)
    for trial in trials:
        trial.speedup = ref.median_ms / trial.median_ms
        trial.max_abs_logprob_diff = float((logprobs[trial.variant] - logprobs[REFERENCE]).abs().max())
    return trials


def summary_table(trials: list[Trial]) -> str:
    """A Markdown table of the trials."""
    lines = ["| variant | median decode forward (ms) | × eager-dynamic | first forward (s) | max abs log-prob diff |",
             "|---|---|---|---|---|"]
    for t in trials:
        lines.append(f"| {t.variant} | {t.median_ms:.2f} | {t.speedup:.2f} | {t.first_forward_s:.1f} | "
                     f"{t.max_abs_logprob_diff:.2e} |")
    return "\n".join(lines)


class _Decoder:
    """One variant's cache and forward over the shared prompt: :meth:`step` decodes one fixed token column."""

    def __init__(self, model: Any, variant: str, prompt: Any, total: int) -> None:
        import torch
        from transformers import DynamicCache, StaticCache

        self.model, self.rows, self.context = model, prompt.shape[0], prompt.shape[1]
        static = variant.endswith("static")
        self.cache = StaticCache(config=model.config, max_cache_len=total) if static else DynamicCache()
        self.forward: Callable[..., Any] = model.forward
        if variant.startswith("compiled"):
            self.forward = torch.compile(model.forward, dynamic=not static)
        with torch.no_grad():
            model(input_ids=prompt, cache=self.cache, use_cache=True, cache_position=torch.arange(self.context))

    def step(self, tokens: Any, step: int) -> tuple[float, Any]:
        """Decode column ``step`` of ``tokens``; the forward's seconds and the next-token log-probs."""
        import torch

        position = self.context + step
        with torch.no_grad():
            start = time.perf_counter()
            logits = self.forward(input_ids=tokens[:, step:step + 1], cache=self.cache, use_cache=True,
                                  position_ids=torch.full((self.rows, 1), position),
                                  cache_position=torch.tensor([position])).logits
            seconds = time.perf_counter() - start
        return seconds, torch.log_softmax(logits[:, -1].float(), dim=-1)


def interleaved(decoders: dict[str, Any], steps: int, tokens: Any) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Decode every step with every variant, the variants in a rotating order within each step (so a
    change of load on shared cores falls on all of them alike); per-variant times and stacked log-probs."""
    import torch

    names = list(decoders)
    times: dict[str, list[float]] = {n: [] for n in names}
    logprobs: dict[str, list[Any]] = {n: [] for n in names}
    for step in range(steps):
        for name in names[step % len(names):] + names[:step % len(names)]:
            seconds, lp = decoders[name].step(tokens, step)
            times[name].append(seconds)
            logprobs[name].append(lp)
    return times, {n: torch.stack(v, dim=1) for n, v in logprobs.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run every variant; print the table and return it with the settings."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", default=",".join(VARIANTS[:3]))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.steps <= args.warmup:
        raise SystemExit("--steps must exceed --warmup")
    import torch

    from opct.config import ModelConfig
    from opct.models import load_model

    torch.set_num_threads(args.threads)
    model = load_model(ModelConfig(name_or_path="organism")).eval()
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, model.config.vocab_size, (args.rows, args.context), generator=gen)
    tokens = torch.randint(0, model.config.vocab_size, (args.rows, args.steps), generator=gen)
    variants = parse_variants(args.variants)
    decoders = {v: _Decoder(model, v, prompt, args.context + args.steps) for v in variants}
    times, logprobs = interleaved(decoders, args.steps, tokens)
    trials = [Trial(v, statistics.median(times[v][args.warmup:]) * 1e3, times[v][0]) for v in variants]
    compare(trials, logprobs)
    table = summary_table(trials)
    print(table)
    result = {"settings": {k: v for k, v in vars(args).items() if k != "out"},
              "torch": torch.__version__, "trials": [asdict(t) for t in trials], "table": table}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    main()
