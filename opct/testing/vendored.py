"""The real tokenizers of two model families, shipped with opct (``opct/testing/tokenizers/``, their source
and licence in its ``SOURCE.md``), so that ``opct model tiny --tokenizer Qwen/Qwen3-0.6B`` needs no network.

A hub id of a vendored family (:data:`VENDORED_IDS`) is read from the local Hugging Face cache when the hub's
own copy is there, else from the shipped copy, unpacked (``tokenizer.json.xz``) into a folder of opct's
cache and checked against its sha256.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
from importlib.resources import files
from pathlib import Path

#: Hub ids whose tokenizer is one of the shipped families'.
VENDORED_IDS: dict[str, str] = {
    **{f"Qwen/Qwen3-{size}": "qwen3" for size in ("0.6B", "1.7B", "4B", "8B", "14B", "32B")},
    "gpt2": "gpt2", "openai-community/gpt2": "gpt2",
}
#: The sha256 of each family's unpacked ``tokenizer.json``.
SHA256 = {
    "qwen3": "c2f2511bc3e54a86cab33c488d748d6505cf76159d489304d7f3d84a69cee89c",
    "gpt2": "d01d634be53b3ba41803a85ba093d03f051e7fe0d570758c8e45a608e52b0ba4",
}
PACKED = "tokenizer.json.xz"


def cache_root() -> Path:
    """Where shipped tokenizers are unpacked: ``$OPCT_CACHE`` or ``~/.cache/opct``, under ``tokenizers/``."""
    return Path(os.environ.get("OPCT_CACHE") or Path.home() / ".cache" / "opct") / "tokenizers"


def hub_copy_cached(hub_id: str) -> bool:
    """Whether the hub's own tokenizer of ``hub_id`` is in the local Hugging Face cache (never a download)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(hub_id, "tokenizer.json"), str)


def vendored_tokenizer(hub_id: str) -> Path | None:
    """The folder of the shipped tokenizer for ``hub_id``, unpacked (once) and checked; None when ``hub_id``
    is no vendored family's."""
    family = VENDORED_IDS.get(hub_id)
    if family is None:
        return None
    folder = cache_root() / f"{family}-{SHA256[family][:12]}"
    if (folder / "tokenizer.json").is_file():
        return folder
    source = Path(str(files("opct.testing") / "tokenizers" / family))
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    data = lzma.decompress((source / PACKED).read_bytes())
    if hashlib.sha256(data).hexdigest() != SHA256[family]:
        raise OSError(f"{source / PACKED} does not unpack to the tokenizer it should (sha256 differs); reinstall opct")
    (tmp / "tokenizer.json").write_bytes(data)
    for extra in source.iterdir():
        if extra.name != PACKED:
            shutil.copy2(extra, tmp / extra.name)
    try:
        tmp.rename(folder)
    except OSError:  # another process unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
