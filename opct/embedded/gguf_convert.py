"""A GGUF file converted into a plain Hugging Face folder: safetensors weights, tokenizer, chat template.

transformers reads GGUF itself (``from_pretrained(folder, gguf_file=...)``, through the ``gguf`` package) and
dequantizes every tensor, but the model it returns keeps the GGUF quantizer attached and refuses
``save_pretrained``. So the weights are moved, key for key (``strict``), into a plain model of the same
config, whose logits are checked equal to the loaded model's before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opct.errors import require_extra

#: The converted folder's record of where its weights came from (:func:`read_record`).
RECORD = "opct_embedded.json"
#: Config keys that describe the GGUF file rather than the model, dropped from the plain config.
_GGUF_ONLY_KEYS = ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version")


def convert_gguf(gguf: Path, out: Path, record: dict[str, Any], card: str) -> dict[str, Any]:
    """Write ``gguf``'s model into the folder ``out`` (which must not exist yet) as float32 safetensors with its
    tokenizer, chat template and generation defaults, ``card`` as its README.md and ``record`` (plus the
    shapes found) as :data:`RECORD`. Returns the record written."""
    require_extra("gguf", "gguf", "converting a GGUF model")
    import torch  # deferred: loads torch and transformers only when converting
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    settings = {k: v for k, v in loaded.config.to_dict().items() if k not in _GGUF_ONLY_KEYS}
    config = AutoConfig.for_model(**settings)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    probe = torch.arange(min(16, config.vocab_size))[None]
    with torch.no_grad():
        if not torch.equal(loaded(probe).logits, plain(probe).logits):
            raise RuntimeError(f"the plain model built from {gguf.name} does not give the loaded model's logits")
    out.mkdir(parents=True)
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    written = {**record, "architecture": type(plain).__name__, "parameters": sum(p.numel() for p in plain.parameters()),
               "vocab_size": config.vocab_size, "dtype": "float32",
               "chat_template": bool(getattr(tokenizer, "chat_template", None))}
    (out / "README.md").write_text(card, encoding="utf-8")
    (out / RECORD).write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    for path in out.iterdir():  # readable as any downloaded model (a weights file may be written owner-only)
        path.chmod(0o644)
    return written


def read_record(folder: Path) -> dict[str, Any] | None:
    """``folder``'s :data:`RECORD`, or ``None`` when it has none (or an unreadable one)."""
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
