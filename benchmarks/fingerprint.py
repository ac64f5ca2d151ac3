"""The cost of the teacher fingerprint (sha256 of every base weight) on a 1.5B-parameter tensor set.

The run's teacher is fingerprinted at the start of every run and checked on every resume
(:func:`opct.models.weights_fingerprint`). This measures it on tensors shaped like
Qwen2.5-1.5B-Instruct (1.54B parameters, bfloat16, 3.1 GB) and compares it, in one run, with its
peer: one ``hashlib.sha256`` over the same bytes laid end to end (the floor for any exact hash) and
``safetensors.torch.save_file`` of the same tensors to a RAM-backed folder (the checkpoint write it sits
beside).

    python benchmarks/fingerprint.py [--out benchmarks/results/fingerprint.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

#: Qwen2.5-1.5B: vocab 151936, hidden 1536, MLP 8960, 28 layers, 12 query / 2 key-value heads of 128.
VOCAB, HIDDEN, MLP, LAYERS, KV = 151936, 1536, 8960, 28, 256


def qwen_like() -> torch.nn.Module:
    """A module whose state dict has Qwen2.5-1.5B's names and shapes, in bfloat16 (memory touched)."""
    shapes = {"model.embed_tokens.weight": (VOCAB, HIDDEN), "model.norm.weight": (HIDDEN,)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        shapes |= {p + "self_attn.q_proj.weight": (HIDDEN, HIDDEN), p + "self_attn.q_proj.bias": (HIDDEN,),
                   p + "self_attn.k_proj.weight": (KV, HIDDEN), p + "self_attn.k_proj.bias": (KV,),
                   p + "self_attn.v_proj.weight": (KV, HIDDEN), p + "self_attn.v_proj.bias": (KV,),
                   p + "self_attn.o_proj.weight": (HIDDEN, HIDDEN), p + "mlp.gate_proj.weight": (MLP, HIDDEN),
                   p + "mlp.up_proj.weight": (MLP, HIDDEN), p + "mlp.down_proj.weight": (HIDDEN, MLP),
                   p + "input_layernorm.weight": (HIDDEN,), p + "post_attention_layernorm.weight": (HIDDEN,)}
    module = torch.nn.Module()
    gen = torch.Generator().manual_seed(0)
    for name, shape in shapes.items():
        t = torch.empty(shape, dtype=torch.bfloat16)
        t.view(torch.int16).random_(-32768, 32767, generator=gen)  # real bytes, not zero pages
        module.register_buffer(name.replace(".", "__"), t)
    return module


def main() -> None:
    from safetensors.torch import save_file

    from opct.models import weights_fingerprint

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/fingerprint.json"))
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = qwen_like()
    tensors = dict(model.state_dict())
    n_params = sum(t.numel() for t in tensors.values())
    n_bytes = sum(t.numel() * t.element_size() for t in tensors.values())

    t0 = time.perf_counter()
    weights_fingerprint(model)
    fingerprint_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    h = hashlib.sha256()
    for t in tensors.values():
        h.update(t.view(torch.uint8).numpy().data)
    floor_s = time.perf_counter() - t0

    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        t0 = time.perf_counter()
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(Path(tmp) / "model.safetensors"))
        save_s = time.perf_counter() - t0

    result = {
        "params": n_params, "bytes": n_bytes, "fingerprint_s": round(fingerprint_s, 2),
        "fingerprint_gb_per_s": round(n_bytes / fingerprint_s / 1e9, 2), "plain_sha256_s": round(floor_s, 2),
        "safetensors_save_s": round(save_s, 2), "ratio_vs_plain_sha256": round(fingerprint_s / floor_s, 3),
        "ratio_vs_safetensors_save": round(fingerprint_s / save_s, 3), "machine": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
