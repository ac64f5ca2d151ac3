"""Operations per static-decoder step, counted on the CPU, with and without the grouped-query attention.

    python benchmarks/decode_step_ops.py [--out FILE.json]

A random model of Qwen3-0.6B's attention layout (28 layers, 16 heads on 8 key/value heads, head_dim 128;
hidden 64 and vocabulary 2,048, which change no count per layer) decodes 8 rows x 16 tokens with
opct's static decoder; every ATen operation of every decode step is counted with a
``TorchDispatchMode``. ``clone`` and ``copy_`` (the cache copies ``repeat_kv`` makes) are named; the total
is what a GPU step launches as kernels before fusion (an upper bound: a few are views). Run it under each
transformers version to compare (the GPU image has 5.17).
"""

from __future__ import annotations

import argparse
import json
import platform
from collections import Counter
from pathlib import Path
from typing import Any

import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoModelForCausalLM, Qwen3Config

from opct.sampling import static_decoder
from opct.sampling.engine import SamplingParams
from opct.sampling.grouped_query_attention import NATIVE_GROUPED_QUERY
from opct.sampling.hf_sampler import HFSampler

#: Qwen3-0.6B's attention layout; the widths that change no count per layer are small.
SHAPE = {"num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
         "hidden_size": 64, "intermediate_size": 128, "vocab_size": 2048, "max_position_embeddings": 512}
ROWS, NEW_TOKENS = 8, 16


class OpCounter(TorchDispatchMode):
    """Counts every ATen operation dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.ops[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


class _Tokenizer:
    """The few fields HFSampler reads."""

    pad_token_id = 0
    eos_token_id = 1
    padding_side = "left"


def count(grouped: bool) -> dict[str, Any]:
    """Mean operations per decode step of the static decoder, ``grouped``: with the grouped-query attention."""
    torch.manual_seed(0)
    config = Qwen3Config(**SHAPE, pad_token_id=0, eos_token_id=1, bos_token_id=1)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    steps: list[Counter[str]] = []
    forward = static_decoder.StaticDecoder._forward

    def counted(self: static_decoder.StaticDecoder, buffers: Any) -> torch.Tensor:
        self.grouped_attention = grouped
        with OpCounter() as counter:
            out = forward(self, buffers)
        steps.append(counter.ops)
        return out

    static_decoder.StaticDecoder._forward = counted  # type: ignore[method-assign]
    original_configs = static_decoder.grouped_query_configs  # forced either way, whatever the version's default
    static_decoder.grouped_query_configs = lambda model: original_configs(model, native=not grouped)  # type: ignore[assignment]
    try:
        sampler = HFSampler(model, _Tokenizer(), decoder="static")
        prompts = [[2 + (i * 7 + j) % 500 for j in range(12 + i)] for i in range(ROWS)]
        with torch.no_grad():
            sampler.generate(prompts, SamplingParams(n=1, temperature=1.0, max_new_tokens=NEW_TOKENS, seed=0,
                                                     min_new_tokens=NEW_TOKENS))
    finally:
        static_decoder.StaticDecoder._forward = forward  # type: ignore[method-assign]
        static_decoder.grouped_query_configs = original_configs
    total = sum(steps, Counter())
    n = len(steps)
    return {"steps": n, "ops_per_step": sum(total.values()) / n, "clone_per_step": total["clone"] / n,
            "copy_per_step": total["copy_"] / n, "sdpa_per_step": total.get("_scaled_dot_product_flash_attention_for_cpu", 0) / n
            + total.get("_scaled_dot_product_attention_math", 0) / n + total.get("scaled_dot_product_attention", 0) / n,
            "top": dict(total.most_common(8))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "python": platform.python_version(),
              "native_grouped_query (the decoder's default: no switch)": NATIVE_GROUPED_QUERY,
              "shape": SHAPE, "rows": ROWS, "new_tokens": NEW_TOKENS,
              "repeat_kv (transformers' SDPA)": count(False), "grouped-query attention (opct)": count(True)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
