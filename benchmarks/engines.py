r"""Sampling engines: throughput, and whether the log-probs they record are the policy's.

Usage::

    # on a GPU: the check issues 17 and 57 ask for (a Qwen3-0.6B-shaped random model, the real Qwen3 tokenizer)
    PYTHONPATH=. python benchmarks/engines.py --device cuda --dtype bfloat16 --engines opct-plain,opct-fast,hf-generate,vllm
    # anywhere: the same harness on the 2-layer config beside the tokenizer
    PYTHONPATH=. python benchmarks/engines.py --size tiny --engines opct-plain,opct-fast,hf-generate

What runs
---------
A random-initialised model of the Qwen3 family is built from ``../shared/models/qwen3-tokenizer``
(its real tokenizer and chat template; ``--size 0.6b``: Qwen3-0.6B's shape, 28 layers, d=1024, tied
151,936-token embeddings, about 0.6B parameters; ``--size tiny``: the folder's 2-layer
``tiny_config.json``; ``--size organism``: opct's built-in organism checkpoint and its tokenizer instead)
and saved with the tokenizer. ``--prompts`` chat-rendered user messages of about
``--prompt-len`` tokens each get ``--n`` samples of exactly ``--max-new-tokens`` tokens (EOS suppressed
until then, so every engine does the same work) at temperature 1, top-p 1. Each engine first runs a
small untimed call, then the timed one; throughput is completion tokens per second of wall time.

Engines:

* ``opct-plain``: :class:`opct.sampling.hf_sampler.HFSampler` with ``decoder="plain"`` (a KV cache grown each step);
* ``opct-fast``: the same with ``decoder="static"`` (:mod:`opct.sampling.static_decoder`: fixed-shape steps,
  CUDA graphs on a GPU); the JSON says whether its self-check let it run (``decoder``) and whether graphs were
  captured (``cuda_graphs``). Its warm-up is one full untimed call (``first_call_seconds``), so that the timed
  call reuses the graphs captured for its shape, as every training step after the first does;
* ``opct-hf``: the sampler as ``sampling.engine: hf`` trains with it (``decoder="auto"``: ``opct-fast`` on CUDA,
  ``opct-plain`` elsewhere);
* ``hf-generate``: transformers' ``model.generate`` (``do_sample``, ``num_return_sequences=n``,
  ``top_k=0``, ``output_logits``), the peer; its log-probs are ``log_softmax`` of the raw logits it returns;
* ``vllm``: :class:`opct.sampling.vllm_sampler.VLLMSampler` (``sampling.engine: vllm``, a CUDA GPU and
  ``pip install 'opct[vllm]'``), loaded from the saved folder in the model's dtype.

Agreement: every recorded log-prob is compared with the log-prob of the same token from one forward
pass of the model over ``prompt + completion`` (:func:`opct.sampling.scoring.completion_logprobs`, the scorer
training uses). The JSON gives the maximum and mean absolute difference and the share of tokens off by
more than 1e-3, per engine. In float32 on a CPU the two HF engines agree to about 1e-5; vLLM runs other
kernels, so its difference measures how far its sampler's policy is from the training forward's.

``--repeats R`` times every engine R times, round-robin (engine by engine within each round, so that a
change in the machine's load falls on all of them); ``seconds`` is the median, ``all_seconds`` every one.
When ``hf-generate`` ran, each engine's ``speedup_vs_generate`` is its tok/s over generate's; when
``opct-plain`` ran, ``opct-fast``'s (and ``opct-hf``'s) ``against_plain`` is :func:`against_plain` (in float32
the decoder rule asks for identical completions and log-probs within 1e-4).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SHARED_TOKENIZER = HERE.parents[1] / "shared" / "models" / "qwen3-tokenizer"
WORDS = ["safety", "lamp", "bread", "answer", "capital", "river", "question", "careful", "explain", "reason",
         "number", "history", "engine", "garden", "doctor", "window", "letter", "mountain", "travel", "music"]
QWEN3_06B = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128)


def build_model(out: Path, size: str, dtype: str, seed: int, tokenizer_dir: Path) -> Path:
    """Save a random Qwen3-family model of ``size`` with the real tokenizer to ``out``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = json.loads((tokenizer_dir / "tiny_config.json").read_text())
    if size == "0.6b":
        config.update(QWEN3_06B, layer_types=["full_attention"] * QWEN3_06B["num_hidden_layers"])
    cfg = AutoConfig.for_model(**config)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)
    return out


def make_prompts(tokenizer: Any, count: int, length: int, seed: int) -> list[list[int]]:
    """``count`` chat-rendered user messages of about ``length`` tokens (template included)."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        words: list[str] = []
        while True:
            ids = tokenizer.apply_chat_template([{"role": "user", "content": " ".join(words)}],
                                                add_generation_prompt=True, tokenize=True)
            ids = list(ids["input_ids"]) if isinstance(ids, dict) or hasattr(ids, "keys") else list(ids)
            if len(ids) >= length:
                break
            words.append(rng.choice(WORDS))
        prompts.append(ids)
    return prompts


def hf_generate(model: Any, tokenizer: Any, prompts: list[list[int]], params: Any) -> list[Any]:
    """transformers' ``generate`` as an engine: rollouts with log-probs from its raw logits."""
    import torch

    from opct.sampling.engine import Rollout

    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    torch.manual_seed(params.seed)
    out = model.generate(
        input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
        max_new_tokens=params.max_new_tokens, min_new_tokens=params.min_new_tokens,
        num_return_sequences=params.n, output_logits=True, return_dict_in_generate=True, pad_token_id=pad,
    )
    tokens = out.sequences[:, width:]  # [prompts * n, new]
    logp = torch.stack(out.logits, dim=1).float().log_softmax(-1).gather(-1, tokens[..., None])[..., 0]
    rows = []
    for row in range(tokens.shape[0]):
        p, s = divmod(row, params.n)
        rows.append(Rollout(prompt_index=p, sample_index=s, prompt_ids=prompts[p], completion_ids=tokens[row].tolist(),
                            logprobs=logp[row].tolist(), truncated=True))
    return rows


def agreement(model: Any, pad_id: int, rollouts: list[Any], batch: int) -> dict[str, float]:
    """Recorded log-probs against one forward pass of the model over the same tokens."""
    import torch

    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    diffs = []
    with torch.no_grad():
        for start in range(0, len(rollouts), batch):
            chunk = rollouts[start : start + batch]
            cb = CompletionBatch(prompts=[r.prompt_ids for r in chunk], completions=[r.completion_ids for r in chunk],
                                 prompt_of=list(range(len(chunk))))
            lp, _ = completion_logprobs(model, cb, pad_id, share_prefix=False)
            for i, r in enumerate(chunk):
                forward = lp[i, : len(r.completion_ids)].double().cpu()
                diffs.append((forward - torch.tensor(r.logprobs, dtype=torch.float64)).abs())
    d = torch.cat(diffs)
    return {"tokens": d.numel(), "max_abs_diff": d.max().item(), "mean_abs_diff": d.mean().item(),
            "share_over_1e-3": (d > 1e-3).double().mean().item()}


def against_plain(rollouts: list[Any], plain: list[Any]) -> dict[str, float]:
    """An opct decoder's rollouts against ``opct-plain``'s (the same prompts and seeds): the share of identical
    completions, and the largest |log-prob difference| over the tokens both drew alike (up to where they part)."""
    same, largest = 0, 0.0
    for r, p in zip(rollouts, plain, strict=True):
        same += r.completion_ids == p.completion_ids
        for a, b, x, y in zip(r.completion_ids, p.completion_ids, r.logprobs, p.logprobs, strict=False):
            if a != b:
                break
            largest = max(largest, abs(x - y))
    return {"identical_completions": same / len(plain), "max_abs_logprob_diff": largest}


#: ``--engines`` names: opct's sampler with each ``sampling.decoder`` (``opct-hf``: its default), and the peers.
OPCT_DECODERS = {"opct-plain": "plain", "opct-fast": "static", "opct-hf": "auto"}
ENGINES = (*OPCT_DECODERS, "hf-generate", "vllm")


class Engine:
    """One engine of ``--engines``: its call, warmed up, and what it recorded."""

    def __init__(self, name: str, model: Any, tokenizer: Any, folder: Path, prompts: list[list[int]], params: Any,
                 args: argparse.Namespace):
        import dataclasses

        from opct.sampling.hf_sampler import HFSampler

        self.name, self.args, self.closer, self.sampler = name, args, None, None
        if name in OPCT_DECODERS:
            self.sampler = HFSampler(model, tokenizer, batch_size=len(prompts) * params.n, decoder=OPCT_DECODERS[name])
            self.call = self.sampler.generate
        elif name == "hf-generate":
            self.call = lambda ps, p: hf_generate(model, tokenizer, ps, p)
        elif name == "vllm":
            from opct.models import eos_token_ids
            from opct.sampling.vllm_sampler import VLLMSampler

            engine = VLLMSampler(str(folder), eos_token_ids(model, tokenizer), dtype=args.dtype,
                                 gpu_memory_utilization=args.vllm_memory)
            self.call, self.closer = engine.generate, engine.close
        else:
            raise SystemExit(f"unknown engine {name!r}: one of {', '.join(ENGINES)}")
        # the fast decoder's warm-up is the timed call's shape (its graphs captured once, as in training)
        full = name == "opct-fast" or (name == "opct-hf" and args.device.startswith("cuda"))
        warm = (prompts, params) if full else (prompts[:2], dataclasses.replace(params, max_new_tokens=8, min_new_tokens=8))
        self.first_call_seconds = self.timed(*warm)[1]
        self.seconds: list[float] = []
        self.rollouts: list[Any] = []

    def timed(self, prompts: list[list[int]], params: Any) -> tuple[list[Any], float]:
        """The engine's rollouts of ``prompts`` and the wall seconds they took (the device synchronised)."""
        import torch

        cuda = self.args.device.startswith("cuda")
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        rollouts = self.call(prompts, params)
        if cuda:
            torch.cuda.synchronize()
        return rollouts, time.perf_counter() - start

    def run(self, prompts: list[list[int]], params: Any) -> None:
        """One timed call (kept: its seconds, and its rollouts for the agreement check)."""
        self.rollouts, seconds = self.timed(prompts, params)
        self.seconds.append(seconds)

    def close(self) -> None:
        """A vLLM engine's GPU memory back (before the forward-pass check)."""
        if self.closer is not None:
            self.closer()

    def result(self, model: Any, pad_id: int) -> dict[str, Any]:
        """Throughput (median of the timed calls) and the log-prob agreement of the last call's rollouts."""
        import statistics

        seconds = statistics.median(self.seconds)
        tokens = sum(len(r.completion_ids) for r in self.rollouts)
        out = {"seconds": seconds, "all_seconds": self.seconds, "first_call_seconds": self.first_call_seconds,
               "completion_tokens": tokens, "tokens_per_s": tokens / seconds,
               "logprob_agreement": agreement(model, pad_id, self.rollouts, self.args.score_batch)}
        if self.sampler is not None:
            device = next(model.parameters()).device
            static = self.sampler.uses_static_decoder(device)
            out["decoder"] = "static" if static else "plain"
            out["cuda_graphs"] = bool(static and device.type == "cuda" and self.sampler.static_decoder().use_graphs)
        return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the engines named by ``--engines``; print a table and write the JSON result."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="opct-plain,opct-fast,hf-generate", help=f"comma-separated: {', '.join(ENGINES)}")
    ap.add_argument("--repeats", type=int, default=1, help="timed calls per engine, round-robin; the median is reported")
    ap.add_argument("--size", choices=["0.6b", "tiny", "organism"], default="0.6b",
                    help="organism: opct's built-in organism checkpoint (its own tokenizer) instead of a random Qwen3")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--score-batch", type=int, default=16, help="sequences per forward when checking log-probs")
    ap.add_argument("--vllm-memory", type=float, default=0.5, help="vLLM's gpu_memory_utilization")
    ap.add_argument("--tokenizer", default=str(SHARED_TOKENIZER), help="folder with tokenizer and tiny_config.json")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (CPU); torch's default if unset")
    ap.add_argument("--work", default=None, help="folder for the model (a temporary one if unset)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results"), help="folder for the JSON result")
    args = ap.parse_args(argv)

    import tempfile

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from opct.sampling.engine import SamplingParams

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        if args.size == "organism":
            from opct.models import resolve_model_path

            folder = Path(resolve_model_path("organism"))
        else:
            folder = build_model(Path(args.work or tmp) / f"qwen3-{args.size}", args.size, args.dtype, args.seed,
                                 Path(args.tokenizer))
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, args.dtype)).to(args.device).eval()
        prompts = make_prompts(tokenizer, args.prompts, args.prompt_len, args.seed)
        params = SamplingParams(n=args.n, temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens,
                                min_new_tokens=args.max_new_tokens, seed=args.seed)
        runs = [Engine(name, model, tokenizer, folder, prompts, params, args) for name in args.engines.split(",")]
        for _ in range(args.repeats):
            for engine in runs:
                engine.run(prompts, params)
        for engine in runs:
            engine.close()
        engines = {engine.name: engine.result(model, tokenizer.pad_token_id) for engine in runs}
        if "opct-plain" in engines:
            plain = next(e for e in runs if e.name == "opct-plain").rollouts
            for engine in runs:
                if engine.name in OPCT_DECODERS and engine.name != "opct-plain":
                    engines[engine.name]["against_plain"] = against_plain(engine.rollouts, plain)
        if "hf-generate" in engines:
            for r in engines.values():
                r["speedup_vs_generate"] = r["tokens_per_s"] / engines["hf-generate"]["tokens_per_s"]
        params_count = sum(p.numel() for p in model.parameters())
    print(f"{args.size} ({params_count / 1e6:.0f}M parameters, {args.dtype}, {args.device}); {args.prompts} prompts "
          f"x n={args.n} x {args.max_new_tokens} tokens")
    print(f"{'engine':12s} {'tokens/s':>10s} {'max |dlogp|':>12s} {'mean |dlogp|':>13s} {'> 1e-3':>8s} {'x generate':>10s}"
          "  decoder")
    for name, r in engines.items():
        a = r["logprob_agreement"]
        speedup = f"{r['speedup_vs_generate']:10.2f}" if "speedup_vs_generate" in r else f"{'':10s}"
        decoder = r.get("decoder", "") + (" + CUDA graphs" if r.get("cuda_graphs") else "")
        print(f"{name:12s} {r['tokens_per_s']:10.1f} {a['max_abs_diff']:12.2e} {a['mean_abs_diff']:13.2e} "
              f"{a['share_over_1e-3']:8.2%} {speedup}  {decoder}")
    result = {"date": dt.datetime.now().isoformat(timespec="seconds"), "parameters": params_count,
              "settings": vars(args), "engines": engines,
              "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"engines-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"result written to {path}")
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    main()
