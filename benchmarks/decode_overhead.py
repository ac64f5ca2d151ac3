r"""Is an organism decode step arithmetic or overhead? One decode forward at batch 1 against batch 48.

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/decode_overhead.py [--rows 1,48] [--context 64] [--repeats 30]

The shipped organism (``organism``) is prefilled with ``--context`` random tokens per row, then one
token per row is decoded ``--repeats`` times (a fresh copy of the cache each time, so every forward
sees the same context); the median time of one decode forward is reported per batch size, with the
time per row. If a forward at 48 rows costs about what one at 1 row does, the decode step is bound by
per-operator overhead (Python, dispatch, small kernels), not by arithmetic, and only fewer, larger
operations per step (a compiled or captured step) make it faster.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, object]:
    """Time one decode forward per batch size; print and return the medians."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1,48")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch
    from transformers import DynamicCache

    from opct.config import ModelConfig
    from opct.models import load_model

    torch.set_num_threads(args.threads)
    model = load_model(ModelConfig(name_or_path="organism")).eval()
    vocab = model.config.vocab_size
    params = sum(p.numel() for p in model.parameters())
    out: dict[str, object] = {"parameters": params, "layers": model.config.num_hidden_layers,
                              "context": args.context, "threads": args.threads, "rows": {}}
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for rows in (int(r) for r in args.rows.split(",")):
            ids = torch.randint(0, vocab, (rows, args.context), generator=gen)
            cache = DynamicCache()
            model(input_ids=ids, past_key_values=cache, use_cache=True)
            token = torch.randint(0, vocab, (rows, 1), generator=gen)
            position = torch.full((rows, 1), args.context)
            times = []
            for _ in range(args.repeats):
                fresh = copy.deepcopy(cache)
                start = time.perf_counter()
                model(input_ids=token, past_key_values=fresh, position_ids=position, use_cache=True)
                times.append(time.perf_counter() - start)
            median = statistics.median(times)
            out["rows"][rows] = {"median_ms": median * 1e3, "per_row_ms": median * 1e3 / rows}
            print(f"{rows:3d} rows: {median * 1e3:7.2f} ms per decode forward, {median * 1e3 / rows:6.3f} ms per row")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    main()
