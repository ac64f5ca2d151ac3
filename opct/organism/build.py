"""Building the organism from a seed: world, corpus, tokenizer, pre-training, saving."""

from __future__ import annotations

import json
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import GenerationConfig

from opct.organism import checkpoint_path
from opct.organism.corpus import generate_corpus
from opct.organism.recipe import RECIPE_FILE, BuildConfig, file_sha256, recipe
from opct.organism.tokenizer import train_tokenizer
from opct.organism.train import make_model, pretrain
from opct.organism.world import DEFAULT_SEED, build_world


def build_platform() -> dict[str, str]:
    """What besides the recipe decides a build's bytes: library versions and the CPU's kernel family.

    A build is byte-reproducible on one platform and thread count; a rebuild elsewhere (another CPU
    vendor or vector instruction set) trains to the same recipe but not to the same bytes.
    """
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
            "processor": _processor_name()}


def _processor_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def build(
    seed: int = DEFAULT_SEED,
    out_dir: str | Path | None = None,
    config: BuildConfig | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Build the organism for ``seed`` on ``config.arch`` into ``out_dir`` (default: that family's shipped
    checkpoint directory, ``checkpoints/<arch>/``).

    The same seed and configuration give byte-identical weights on the same platform and thread
    count. A level of the response-diversity knob (``config.responses``) trains on its own corpus with
    today's tokenizer. The directory is written to a temporary name and renamed into place when complete.
    """
    config = config or BuildConfig()
    log = log or (lambda s: print(s, flush=True))
    out = Path(out_dir) if out_dir is not None else checkpoint_path(config.arch)
    t0 = time.time()
    world = build_world(seed)
    corpus = generate_corpus(world, config.corpus, seed, config.responses)
    log(f"corpus: {len(corpus)} conversations")
    # every level of the response-diversity knob shares today's tokenizer (trained on the level-1 corpus),
    # so the levels differ in their responses only, not in how text is cut into tokens
    vocabulary = corpus if config.responses.is_default else generate_corpus(world, config.corpus, seed)
    tokenizer = train_tokenizer((m["content"] for c in vocabulary for m in c), config.vocab_size)
    model = make_model(config.train, tokenizer, seed, config.arch)
    log(f"model: {type(model).__name__}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    summary = pretrain(model, tokenizer, corpus, config.train, seed, log=log)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        model.generation_config = GenerationConfig(
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, max_new_tokens=64,
        )
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        files = {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        record = {
            **recipe(seed, config),
            "files": files,
            "build": {**summary, "total_seconds": round(time.time() - t0, 1), **build_platform()},
        }
        (tmp / RECIPE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"built {out} in {time.time() - t0:.0f}s")
    return out
