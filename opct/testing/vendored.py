"""The real tokenizers of two model families, shipped with opct (``opct/testing/tokenizers/``, their source
and licence in its ``SOURCE.md``), so that ``opct model tiny --tokenizer Qwen/Qwen3-0.6B`` needs no network.

A hub id of a vendored family (:data:`VENDORED_IDS`) is read from the local Hugging Face cache when the hub's
own copy is there, else from the shipped copy, unpacked (``tokenizer.json.xz``) into a folder of opct's
cache and checked against its sha256. The unpacked folder is checked again each time it is used (its
``tokenizer.json`` against the sha256, every other file against the shipped one's bytes, about 20 ms): a damaged
or cut one is unpacked afresh, with a one-line notice naming it. A damaged shipped file is an error naming it.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import warnings
from importlib.resources import files
from pathlib import Path

from opct.errors import FAULT, OpctError, OpctWarning

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


class ShippedTokenizerError(OpctError):
    """A tokenizer file shipped with opct is damaged (a broken install): reinstall opct."""

    exit_code = FAULT


class TokenizerCacheRebuilt(OpctWarning):
    """An unpacked shipped tokenizer in opct's cache was damaged and has been unpacked afresh."""


def shipped_folder(family: str) -> Path:
    """The folder of ``family``'s shipped tokenizer files inside the installed opct."""
    return Path(str(files("opct.testing") / "tokenizers" / family))


def _damage(folder: Path, source: Path, family: str) -> str | None:
    """What is wrong with the unpacked ``folder`` (a missing file, or one that differs from what was shipped);
    None when it is whole."""
    try:
        if hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest() != SHA256[family]:
            return "its tokenizer.json differs from the shipped one: cut or damaged"
        for extra in source.iterdir():
            if extra.name != PACKED and (folder / extra.name).read_bytes() != extra.read_bytes():
                return f"its {extra.name} differs from the shipped one: cut or damaged"
    except OSError as err:
        return f"its {Path(err.filename or folder).name} cannot be read: {err.strerror or err}"
    return None


def _unpack(source: Path, family: str) -> bytes:
    """The shipped ``tokenizer.json`` of ``family``, unpacked and checked; a damaged shipped file is a
    :class:`ShippedTokenizerError` naming it."""
    packed = source / PACKED
    remedy = ("reinstall opct (pip install --force-reinstall opct, or git checkout the file in a checkout), or give "
              "--tokenizer a tokenizer folder of your own")
    try:
        data = lzma.decompress(packed.read_bytes())
    except lzma.LZMAError as err:
        raise ShippedTokenizerError(f"{packed}: the {family} tokenizer shipped with opct is damaged (not a valid xz "
                                    f"file: {err}); {remedy}") from None
    if hashlib.sha256(data).hexdigest() != SHA256[family]:
        raise ShippedTokenizerError(f"{packed}: the {family} tokenizer shipped with opct is damaged (it does not unpack "
                                    f"to the tokenizer it should: its sha256 differs); {remedy}")
    return data


def vendored_tokenizer(hub_id: str) -> Path | None:
    """The folder of the shipped tokenizer for ``hub_id``, unpacked (once) and checked; None when ``hub_id``
    is no vendored family's. An unpacked folder found damaged is unpacked afresh, with a
    :class:`TokenizerCacheRebuilt` notice naming it and what was wrong."""
    family = VENDORED_IDS.get(hub_id)
    if family is None:
        return None
    folder = cache_root() / f"{family}-{SHA256[family][:12]}"
    source = shipped_folder(family)
    if folder.exists() or folder.is_symlink():
        damage = _damage(folder, source, family)
        if damage is None:
            return folder
        warnings.warn(TokenizerCacheRebuilt(f"the unpacked {family} tokenizer in opct's cache, {folder}, was damaged "
                                            f"({damage}); unpacked it afresh from the shipped copy"), stacklevel=2)
    data = _unpack(source, family)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "tokenizer.json").write_bytes(data)
    for extra in source.iterdir():
        if extra.name != PACKED:
            shutil.copy2(extra, tmp / extra.name)
    if folder.exists() or folder.is_symlink():  # the damaged copy: moved aside, then removed
        old = folder.with_name(f".{folder.name}.{os.getpid()}.damaged")
        try:
            folder.rename(old)
        except OSError:  # another process moved it first
            pass
        else:
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink()
    try:
        tmp.rename(folder)
    except OSError:  # another process unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
