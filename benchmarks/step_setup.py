"""benchmarks/opct_step.py's set-up, in the main process: the model, the prompts, this machine's GEMM peak and
the model FLOPs of one OPCT step."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TEXT = (
    "what is the capital of zarnia the answer velmora think explain how to bake bread mix flour water "
    "and yeast then sorry can help with that request warning keep lamp away from"
)



def build_model(out: Path, args: argparse.Namespace) -> Path:
    """A random Llama whose tokenizer is padded with added tokens up to ``args.vocab``."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from opct.testing import make_tiny_model

    make_tiny_model(
        out,
        vocab_size=512,
        hidden_size=args.hidden,
        layers=args.layers,
        heads=args.heads,
        intermediate_size=args.intermediate,
        max_positions=4 * (args.prompt_len + args.teacher_extra + args.completion_len) + 64,
        seed=args.seed,
    )
    tok = AutoTokenizer.from_pretrained(out)
    if args.vocab > len(tok):
        tok.add_tokens([f"<|x{i}|>" for i in range(args.vocab - len(tok))])
        tok.save_pretrained(out)
        torch.manual_seed(args.seed)
        model = LlamaForCausalLM.from_pretrained(out)
        model.resize_token_embeddings(len(tok), mean_resizing=False)
        with torch.no_grad():  # random rows for the new tokens, like the rest of the random model
            std = model.config.initializer_range
            model.get_input_embeddings().weight.normal_(0.0, std)
            model.get_output_embeddings().weight.normal_(0.0, std)
        model.save_pretrained(out)
    return out


def _text_of_length(rng: Any, target: int, length: Callable[[str], int]) -> str:
    """Random words, as few as make ``length(text)`` reach ``target`` tokens."""
    words: list[str] = []
    while length(" ".join(words)) < target:
        words.append(rng.choice(TEXT.split()))
    return " ".join(words)


def make_prompts(model_dir: Path, args: argparse.Namespace, count: int) -> list[dict[str, Any]]:
    """Distinct prompts of about ``prompt_len`` tokens, privileged contexts of about ``teacher_extra``."""
    import random

    from transformers import AutoTokenizer

    from opct.models import render_prompt

    tok = AutoTokenizer.from_pretrained(model_dir)
    rng = random.Random(args.seed)
    out = []
    for i in range(count):
        prompt = _text_of_length(rng, args.prompt_len, lambda t: len(render_prompt(tok, t)))
        target = len(render_prompt(tok, prompt)) + args.teacher_extra
        context = _text_of_length(rng, target, lambda t, p=prompt: len(render_prompt(tok, f"{p}\n\n{t}")))
        teacher = f"{prompt}\n\n{context}"  # TRL's default teacher_prompt_template
        out.append(
            {
                "id": f"q{i}",
                "prompt": prompt,
                "privileged_context": context,
                "teacher_text": teacher,
                "prompt_ids": render_prompt(tok, prompt),
                "teacher_ids": render_prompt(tok, teacher),
            }
        )
    return out


def gemm_peak(device: str, threads: int, size: int = 2048, reps: int = 10) -> float:
    """Best fp32 ``torch.mm`` throughput in GFLOP/s over a few square sizes."""
    import torch

    torch.set_num_threads(threads)
    best = 0.0
    for n in (size // 2, size):
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        for _ in range(2):
            a @ b
        for _ in range(reps):
            sync_device(device)
            t = time.perf_counter()
            a @ b
            sync_device(device)
            best = max(best, 2 * n**3 / (time.perf_counter() - t) / 1e9)
    return best


def sync_device(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def model_dims(model_dir: Path, args: argparse.Namespace) -> dict[str, int]:
    """Sizes the FLOP formula needs, from the model's config."""
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(model_dir)
    d, inter, layers, vocab = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size
    head_dim = d // c.num_attention_heads
    kv = c.num_key_value_heads * head_dim
    shapes = [(d, d), (d, kv), (d, kv), (d, d), (d, inter), (d, inter), (inter, d)]  # q k v o gate up down
    n_lin = layers * sum(i * o for i, o in shapes)
    n_lora = layers * sum(args.lora_r * (i + o) for i, o in shapes)
    embeddings = (1 if getattr(c, "tie_word_embeddings", False) else 2) * vocab * d  # a tied output layer is the input's
    total = n_lin + embeddings + (2 * layers + 1) * d
    return {"d": d, "layers": layers, "vocab": vocab, "n_lin": n_lin, "n_lora": n_lora, "params": total}


def step_flops(
    dims: dict[str, int], batch: int, n: int, p: float, pt: float, c: int, full: bool
) -> dict[str, float]:
    """Model FLOPs of one OPCT step (see the module docstring), by phase."""
    d, layers, vocab = dims["d"], dims["layers"], dims["vocab"]
    head = 2 * d * vocab
    n_policy = dims["n_lin"] + (0 if full else dims["n_lora"])

    def forward(prompt_len: float, n_lin: int) -> tuple[float, float, float, float]:
        """(linear, attention, head) FLOPs and token count of one pass: prompts once, completions n times."""
        prompt_tokens = batch * prompt_len
        comp_tokens = n * batch * (c - 1)
        # attention keys: prompt token j attends to j keys; completion token t (1..C-1) to P + t keys
        attn_keys = batch * prompt_len * (prompt_len + 1) / 2 + n * batch * sum(
            prompt_len + t + 1 for t in range(c - 1)
        )
        linear = 2 * n_lin * (prompt_tokens + comp_tokens)
        attn = 4 * layers * d * attn_keys
        logits = head * (batch + comp_tokens)
        return linear, attn, logits, prompt_tokens + comp_tokens

    g_lin, g_attn, g_head, _ = forward(p, n_policy)
    t_lin, t_attn, t_head, _ = forward(pt, dims["n_lin"])
    s_lin, s_attn, s_head, s_tokens = forward(p, n_policy)
    trainable = (dims["n_lin"] if full else dims["n_lora"]) * s_tokens * 2 + (s_head if full else 0.0)
    backward = s_lin + 2 * s_attn + s_head + trainable
    out = {
        "generation": g_lin + g_attn + g_head,
        "teacher": t_lin + t_attn + t_head,
        "student_forward": s_lin + s_attn + s_head,
        "student_backward": backward,
    }
    out["total"] = sum(out.values())
    return out
