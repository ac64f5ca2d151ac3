r"""The device check's first section: the static decoder samples from the live weights under bf16 autocast.

What it guards against (issue 70): training samples under ``accelerator.autocast()``, which caches the
low-precision cast of every trainable float32 leaf for the rest of the region. A CUDA graph recorded over
such a cached cast would keep sampling from it: from memory freed when the region ended, and never from
the weights an optimizer step has changed. The decoder records its graphs with the cast cache off and
frees them after each call (``docs/training.md``, "The decoder"); this probe checks the result on the GPU.

For each variant (``lora``: a PEFT adapter left unmerged on float32 weights; ``full``: float32 weights
trained whole), on a random Qwen3-shaped model with float32 weights, under bfloat16 autocast:

1. sample with the static decoder (CUDA graphs on a GPU) and with the plain decoder, the same prompts and seeds;
2. score both with the trainer's forward (the same autocast) and apply the decoder rule of
   ``opct/sampling/fast_paths.py`` (``decoder_disagreement``);
3. change the trainable weights in place, as an optimizer step does, and do 1–2 again: the second call must
   keep the rule against the *new* weights' forward.

It also records how far the new weights' forward is from the old one on the second call's tokens
(``weights_moved_logprob``): a change smaller than the rule's limit could not tell stale weights from live
ones, and the probe says so. Usage: ``python benchmarks/device_sections.py probe ...`` (the check runs it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import engines  # beside this file

#: The probe's sampling: rows, tokens; small so that the whole probe takes seconds on a GPU.
PROMPTS, SAMPLES, NEW_TOKENS, PROMPT_LEN = 8, 2, 32, 40
SMOKE_NEW_TOKENS = 8
#: Decoder layers of the GPU probe's model (Qwen3-0.6B's widths).
PROBE_LAYERS = 4
#: How far the optimizer-like change moves each trainable tensor, relative to its own standard deviation.
STEP_SCALE = 0.2


def _trainable(model: Any) -> list[Any]:
    return [p for p in model.parameters() if p.requires_grad]


def _forward_logprobs(model: Any, rollouts: list[Any], pad_id: int) -> list[list[float]]:
    import torch

    from opct.sampling.scoring import CompletionBatch, completion_logprobs

    batch = CompletionBatch(prompts=[r.prompt_ids for r in rollouts], completions=[r.completion_ids for r in rollouts],
                            prompt_of=list(range(len(rollouts))))
    with torch.no_grad():
        logprobs, _ = completion_logprobs(model, batch, pad_id, share_prefix=False)
    return [logprobs[i, : len(r.completion_ids)].double().cpu().tolist() for i, r in enumerate(rollouts)]


def _deviation(model: Any, rollouts: list[Any], pad_id: int) -> float:
    """The largest |recorded log-prob − the trainer's forward| over ``rollouts`` (autocast as the caller's):
    the decode section's own check (:func:`engines.agreement`)."""
    return engines.agreement(model, pad_id, rollouts, batch=len(rollouts))["max_abs_diff"]


def probe_variant(variant: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One variant's two calls: each call's deviations, the rule's verdict, and how far the weights moved."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from opct.sampling.engine import SamplingParams
    from opct.sampling.fast_paths import decoder_disagreement
    from opct.sampling.hf_sampler import HFSampler

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(args.device)
    if variant == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", lora_dropout=0.0))
        generator = torch.Generator().manual_seed(1)
        for name, p in model.named_parameters():  # a trained adapter, not PEFT's zero-initialised B
            if "lora_B" in name:
                p.data.copy_(torch.randn(p.shape, generator=generator).to(p) * 0.02)
    model.eval()
    pad = tokenizer.pad_token_id
    new_tokens = SMOKE_NEW_TOKENS if args.smoke else NEW_TOKENS
    prompts = engines.make_prompts(tokenizer, PROMPTS, PROMPT_LEN, 0)
    params = SamplingParams(n=SAMPLES, temperature=1.0, top_p=1.0, max_new_tokens=new_tokens,
                            min_new_tokens=new_tokens, seed=0)
    rows = PROMPTS * SAMPLES
    static = HFSampler(model, tokenizer, batch_size=rows, decoder="static")
    plain = HFSampler(model, tokenizer, batch_size=rows, decoder="plain")
    device_type = torch.device(args.device).type
    calls, previous = [], None
    for call in (1, 2):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            fast_rollouts = static.generate(prompts, dataclasses.replace(params, seed=call))
            plain_rollouts = plain.generate(prompts, dataclasses.replace(params, seed=call))
            fast_dev, plain_dev = _deviation(model, fast_rollouts, pad), _deviation(model, plain_rollouts, pad)
            broken = decoder_disagreement(model, plain_rollouts, fast_rollouts, plain_dev, fast_dev)
            record: dict[str, Any] = {"call": call, "static_deviation": fast_dev, "plain_deviation": plain_dev,
                                      "rule": broken or "kept"}
            uses_static = static.uses_static_decoder(torch.device(args.device))
            record["decoder"] = "static" if uses_static else "plain (the static decoder's self-check fell back)"
            record["cuda_graphs"] = bool(uses_static and device_type == "cuda" and static.static_decoder().use_graphs)
        if previous is not None:  # the old weights' forward on this call's tokens against the new weights', each in
            # its own autocast region (within one region autocast would reuse the first forward's cached casts)
            with torch.autocast(device_type, dtype=torch.bfloat16):
                now = _forward_logprobs(model, fast_rollouts, pad)
            record["weights_moved_logprob"] = max(abs(a - b) for new_row, old_row in zip(now, previous(fast_rollouts),
                                                                                           strict=True)
                                                  for a, b in zip(new_row, old_row, strict=True))
        calls.append(record)
        if call == 1:  # an optimizer-like step on every trainable tensor, in place
            old_state = {id(p): p.detach().clone() for p in _trainable(model)}
            generator = torch.Generator().manual_seed(2)
            with torch.no_grad():
                for p in _trainable(model):
                    p.add_(torch.randn(p.shape, generator=generator).to(p) * STEP_SCALE * (p.std() + 1e-3))

            def previous(rollouts: list[Any], old_state: dict[int, Any] = old_state) -> list[list[float]]:
                live = {id(p): p.detach().clone() for p in _trainable(model)}
                with torch.no_grad():
                    for p in _trainable(model):
                        p.copy_(old_state[id(p)])
                try:
                    with torch.autocast(device_type, dtype=torch.bfloat16):
                        return _forward_logprobs(model, rollouts, pad)
                finally:
                    with torch.no_grad():
                        for p in _trainable(model):
                            p.copy_(live[id(p)])
    second = calls[-1]
    kept = all(c["rule"] == "kept" for c in calls)
    telling = second.get("weights_moved_logprob", 0.0) > max(second["static_deviation"], second["plain_deviation"])
    return {"calls": calls, "kept": kept, "change_tells_stale_from_live": telling,
            "trainable_parameters": sum(p.numel() for p in _trainable(model))}


def build_probe_model(out: Path, smoke: bool, tokenizer_dir: Path) -> Path:
    """A random Qwen3 model in float32 with the real tokenizer: the tokenizer folder's 2-layer tiny config
    under ``smoke``, else Qwen3-0.6B's widths with 4 layers (the mechanism is per layer; 28 would only add time)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer


    config = json.loads((tokenizer_dir / "tiny_config.json").read_text())
    if not smoke:
        config.update(engines.QWEN3_06B, num_hidden_layers=PROBE_LAYERS, layer_types=["full_attention"] * PROBE_LAYERS)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=torch.float32).save_pretrained(out)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)
    return out


def section_probe(args: argparse.Namespace) -> dict[str, Any]:
    """The probe (module docstring) for the ``lora`` and ``full`` variants; status ``ok`` when both keep the
    decoder rule on both calls and the weights' change was large enough to tell stale weights from live ones."""

    size = "tiny" if args.smoke else "0.6b-width, 4 layers"
    folder = args.work / ("probe-qwen3-tiny" if args.smoke else "probe-qwen3-0.6b-4-layers")
    build_probe_model(folder, args.smoke, Path(args.tokenizer))
    variants = {name: probe_variant(name, folder, args) for name in ("lora", "full")}
    ok = all(v["kept"] and v["change_tells_stale_from_live"] for v in variants.values())
    failed = [f"{name}: " + "; ".join(f"call {c['call']}: {c['rule']}" for c in v["calls"] if c["rule"] != "kept")
              for name, v in variants.items() if not v["kept"]]
    weak = [name for name, v in variants.items() if not v["change_tells_stale_from_live"]]
    note = "; ".join([*failed, *(f"{name}: the weights' change moved the forward less than the decoders' deviation"
                                 for name in weak)])
    return {"status": "ok" if ok else "failed", "note": note,
            "metrics": {"size": size, "autocast": "bfloat16", "weights": "float32", "variants": variants}}
