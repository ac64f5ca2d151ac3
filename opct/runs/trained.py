"""A trained model folder (a run's ``final/``, or an export of it): what its ``opct_checkpoint.json``
says, what that file may decide, and whether the folder holds what it claims.

The record says what the run trained with (the model spec, its base, a hash of the base's weights), so
evaluation renders the training ids and refuses a changed base (:func:`opct.models.load_for_inference`).
Three rules keep a checkpoint from being loaded as something other than it is:

* **no code without consent**: the record never turns ``trust_remote_code`` on. A folder whose record
  asks for it is refused unless the command itself allowed remote code (``--trust-remote-code``, or
  ``model.trust_remote_code`` in the user's own config), because loading it without that code could
  silently give another model (:func:`check_remote_code_consent`);
* **exactly its tensors**: an adapter file, or a full model's weights, missing a tensor or holding one
  the model does not have is an error naming them (:func:`load_adapter`, :func:`check_loading_info`),
  never a model left at its initial weights (an adapter without its ``lora_B`` is the untouched base);
* **an unreadable record is an error naming the file**, and saying what to do, not a parser's message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from opct.config import ModelConfig
from opct.runs.errors import ModelCheckpointError, RemoteCodeNotAllowedError
from opct.runs.layout import CHECKPOINT_FILE, RunLayout, is_run_dir

ADAPTER_CONFIG, ADAPTER_WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
_REWRITE = ("Restore the folder from a copy, rerun the run's `opct train` command (a finished run rebuilds "
            "final/ from its last checkpoint), or train again.")


def _first(names: list[str], shown: int = 3) -> str:
    """``7 (a, b, c, ...)``: how many names, and the first few."""
    return f"{len(names)} ({', '.join(names[:shown])}{', ...' if len(names) > shown else ''})"


def read_checkpoint_record(folder: str | Path) -> dict[str, Any] | None:
    """The ``opct_checkpoint.json`` of a checkpoint folder, or None when it has none.

    A record that is not readable JSON, or not an object with a ``model`` object, is a
    :class:`~opct.runs.errors.ModelCheckpointError` naming the file."""
    path = Path(folder) / CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:  # a cut or garbled file (UnicodeDecodeError is a ValueError)
        raise ModelCheckpointError(f"{path} is unreadable ({err}). {_REWRITE}") from err
    if not isinstance(record, dict) or not isinstance(record.get("model", {}), dict):
        raise ModelCheckpointError(
            f"{path} is not an opct checkpoint record (a JSON object whose 'model' is the spec the run trained "
            f"with). {_REWRITE}"
        )
    return record


def checkpoint_folder(spec: str) -> Path | None:
    """The trained checkpoint ``spec`` names (a run directory's ``final/``, or a folder with an
    ``opct_checkpoint.json``), or None when ``spec`` is no opct checkpoint."""
    run = RunLayout(Path(spec))
    if run.final_record.is_file():
        return run.final
    return run.root if (run.root / CHECKPOINT_FILE).is_file() else None


def checkpoint_spec(spec: str) -> ModelConfig | None:
    """The model spec a trained checkpoint (run directory or its ``final/``) was trained with, or None."""
    folder = checkpoint_folder(spec)
    record = read_checkpoint_record(folder) if folder is not None else None
    if record is None or "model" not in record:
        return None
    try:
        return ModelConfig.model_validate(record["model"])
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ModelCheckpointError(
            f"{folder / CHECKPOINT_FILE}: model.{where}: {first['msg']}; the record is damaged. {_REWRITE}"
        ) from err


def resolve_checkpoint(spec: str) -> tuple[str, str | None]:
    """Where the weights of ``spec`` are: ``(model_or_base, adapter_dir)``.

    ``spec`` is ``organism``, a hub id or local model folder, a run's ``final/`` (or any folder with
    an ``opct_checkpoint.json``), or a run directory (its ``final/`` is used).
    """
    folder = checkpoint_folder(spec)
    if folder is not None:
        if (folder / ADAPTER_CONFIG).exists():
            base = (read_checkpoint_record(folder) or {}).get("base_model")
            if not isinstance(base, str) or not base:
                raise ModelCheckpointError(f"{folder / CHECKPOINT_FILE} names no base_model for its adapter. {_REWRITE}")
            return base, str(folder)
        return str(folder), None
    if is_run_dir(Path(spec)):
        raise FileNotFoundError(f"{spec} is a run directory without a finished checkpoint (no final/); finish or resume the run first")
    return spec, None


def check_remote_code_consent(folder: Path, record: dict[str, Any], allowed: bool) -> None:
    """Refuse a checkpoint whose record asks for ``trust_remote_code`` when the command did not allow it.

    Only the command line (``--trust-remote-code``) or the user's own config turns remote code on; a
    file inside a checkpoint never does. Loading such a model without its code could silently build a
    different model (the library's own class of the same name), so it is refused rather than loaded."""
    model = record.get("model") or {}
    if allowed or not model.get("trust_remote_code"):
        return
    base = record.get("base_model") or model.get("name_or_path") or str(folder)
    raise RemoteCodeNotAllowedError(
        f"{folder / CHECKPOINT_FILE} records trust_remote_code: true (the model was trained with code from the "
        f"files of {base}), and this command did not allow remote code; a checkpoint's own files never turn it "
        "on, and loading it without that code could give a different model. If you trust that code, pass "
        "--trust-remote-code (or set model.trust_remote_code: true in your config file)."
    )


def _mismatch(where: str, missing: list[str], unexpected: list[str], mismatched: list[str] | None = None) -> None:
    """Raise naming the tensors a checkpoint lacks, adds or has in another shape (nothing when all match)."""
    parts = [f"{what} {_first(sorted(names))}" for what, names in
             (("missing", missing), ("unexpected", unexpected), ("of another shape", mismatched or [])) if names]
    if parts:
        raise ModelCheckpointError(
            f"{where} does not hold exactly the model's tensors: {'; '.join(parts)}. It is damaged or was written "
            "for another model, and loading it would measure a model other than the trained one. " + _REWRITE
        )


def check_loading_info(info: dict[str, Any], folder: str | Path) -> None:
    """Refuse a full model checkpoint whose weights lack or add a tensor (``from_pretrained``'s loading info)."""
    mismatched = [m[0] if isinstance(m, tuple | list) else str(m) for m in info.get("mismatched_keys") or ()]
    _mismatch(f"the weights in {folder}", list(info.get("missing_keys") or ()), list(info.get("unexpected_keys") or ()),
              mismatched)


def load_adapter(model: Any, folder: str | Path) -> Any:
    """``model`` with the LoRA adapter of ``folder`` merged in, after checking the adapter file holds exactly
    the adapter's tensors (PEFT only warns about a missing one and leaves it at its initial value)."""
    from peft import PeftModel, get_peft_model_state_dict
    from safetensors import SafetensorError, safe_open

    file = Path(folder) / ADAPTER_WEIGHTS
    if not file.is_file():
        raise ModelCheckpointError(f"{folder} has {ADAPTER_CONFIG} but no {ADAPTER_WEIGHTS}. {_REWRITE}")
    try:
        with safe_open(str(file), framework="pt") as handle:
            found = set(handle.keys())
        peft_model = PeftModel.from_pretrained(model, str(folder))
    except (SafetensorError, RuntimeError, OSError) as err:  # a cut file, a tensor of another shape
        raise ModelCheckpointError(f"{file} cannot be loaded onto its base ({str(err).splitlines()[0]}). {_REWRITE}") from err
    local_base = getattr(model, "name_or_path", None)
    for config in peft_model.peft_config.values():  # PEFT's vocabulary check reads the base here, never the hub
        config.base_model_name_or_path = local_base or config.base_model_name_or_path
    expected = set(get_peft_model_state_dict(peft_model))
    _mismatch(str(file), sorted(expected - found), sorted(found - expected))
    return peft_model.merge_and_unload()
