"""A trained checkpoint as one standalone model folder (``opct export``).

A full fine-tuning run's ``final/`` is already a complete Hugging Face model folder (``config.json``,
weights, tokenizer with its chat template). A LoRA run's ``final/`` holds the adapter only, with the
tokenizer it trained with: tools that take an adapter load it on its base (lm-eval-harness:
``pretrained=<base>,peft=<final>,tokenizer=<final>``), but a tool that wants one folder cannot.
:func:`export_merged` writes that folder: the adapter merged into its base, after the base's weights
were checked against the sha256 the run recorded and its files against the tensors they must hold
(:func:`opct.models.load_for_inference`; remote code only with ``--trust-remote-code``), the
checkpoint's tokenizer as saved, an ``opct_checkpoint.json`` that names the checkpoint it came from,
and a model card. The export is itself an opct checkpoint: ``opct eval --model <export>`` renders
prompts with the run's recorded settings, as it does for the run. :func:`push_to_hub` publishes such a
folder to a Hugging Face hub repository (``opct export RUN --push-to-hub REPO``) through
``huggingface_hub``'s ``HfApi`` (``create_repo``, then ``upload_folder``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from opct.errors import OpctError, read_json
from opct.models import checkpoint_folder, load_for_inference, read_checkpoint_record, weights_fingerprint
from opct.runs.model_card import CARD_FILE, CHECKPOINT_FILE, export_card, is_hub_id
from opct.runs.outputs import check_output
from opct.runs.publish import portable_name, portable_record, run_eval_folders, run_evaluations

DTYPES = ("float32", "bfloat16", "float16", "auto")
ADAPTER_CONFIG = "adapter_config.json"


class ExportError(OpctError, ValueError):
    """A checkpoint that cannot be exported as asked (not an opct checkpoint, an existing output...)."""


def export_merged(spec: str | Path, out: str | Path, dtype: str | None = None, overwrite: bool = False,
                  trust_remote_code: bool = False, eval_results: list[Path] | None = None,
                  adapter_only: bool = False, name: str | None = None, base_model: str | None = None) -> Path:
    """Write the trained checkpoint ``spec`` (a run directory or its ``final/``) to ``out`` as one model folder.

    ``dtype`` is the dtype to merge and save in (default: the one the run trained in; the base weights
    are checked against the recorded sha256 whatever it is). ``trust_remote_code``: the caller's consent
    to run the model's own code; a checkpoint recording it is refused without it
    (:func:`opct.runs.trained.check_remote_code_consent`). ``out`` must be new or empty, or, with
    ``overwrite``, an earlier export; a folder of anything else (a run, an eval, an attack, an
    experiment, other files) is never written into, replaced or deleted (:func:`check_export_output`).
    It is written to a hidden ``.<out>.opct-export.tmp`` beside it and renamed, so a failed export leaves
    no half-written folder. Returns ``out``.

    ``adapter_only``: a LoRA run's adapter as it is (``adapter_config.json`` naming its base portably),
    not merged. No file of the export holds an absolute local path (:func:`opct.runs.publish.portable_record`).
    The card's ``model-index`` and Evaluation section come from the run's own eval results on exactly
    these weights, when they exist (its experiment's, and the ``opct eval`` folders ``eval_results``);
    ``name`` names the model there (default: ``out``'s folder name; the hub repository when pushed).

    ``base_model``: where the base will be found where the export is used (a hub id, or a folder path as given,
    which the caller chose to publish): written as is into ``adapter_config.json``'s
    ``base_model_name_or_path``, the record's ``base_model`` and the card (its front matter when a hub id, its
    load and lm-eval lines), so ``peft.AutoPeftModelForCausalLM.from_pretrained(out)`` loads the adapter on it.
    """

    folder = checkpoint_folder(str(spec))
    if folder is None:
        raise ExportError(f"{spec} is no trained opct checkpoint (a run directory with final/, or a folder with "
                          f"{CHECKPOINT_FILE}); finish or resume the run first")
    record: dict[str, Any] = read_checkpoint_record(folder) or {}
    spec_record = record.get("model", {})
    dtype = dtype or spec_record.get("dtype", "float32")
    if dtype not in DTYPES:
        raise ExportError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    out = Path(out)
    if out.resolve() == folder.resolve() or folder.resolve() in out.resolve().parents:
        raise ExportError(f"--out {out} is inside the checkpoint {folder}; a rerun of the run would delete it. "
                          "Choose a folder outside final/, e.g. the run directory's merged/.")
    check_export_output(out, folder, overwrite)
    if base_model is not None:
        check_base_model(base_model)


    if adapter_only and not (folder / ADAPTER_CONFIG).is_file():
        raise ExportError(f"--adapter-only: {folder} holds no LoRA adapter (finetune: {record.get('finetune')}); "
                          "export it without --adapter-only")
    model, _ = load_for_inference(str(folder), dtype=dtype, device="cpu", trust_remote_code=trust_remote_code,
                                  revision=spec_record.get("revision"))
    evaluations = run_evaluations([*run_eval_folders(folder.parent), *(eval_results or [])], weights_fingerprint(model))
    tmp = out.with_name(f".{out.name}.opct-export.tmp")  # opct's own name: never another program's folder
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _write_export(tmp, folder, record, spec_record, dtype, model, adapter_only, trust_remote_code, evaluations,
                      name or out.name, base_model)
        check_export_output(out, folder, overwrite)  # again: the folder may have changed while the model merged
        if out.exists():
            shutil.rmtree(out)  # an empty folder, or an earlier export (--overwrite)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed export leaves nothing behind, not even its temporary folder
        raise
    return out


def _write_export(tmp: Path, folder: Path, record: dict[str, Any], spec_record: dict[str, Any], dtype: str, model: Any,
                  adapter_only: bool, trust_remote_code: bool, evaluations: Any, name: str,
                  base_model: str | None) -> None:
    """Write the export of the checkpoint ``folder`` into ``tmp``: the merged model (or the adapter), the
    tokenizer, the portable record and the card."""
    from transformers import AutoTokenizer

    exported = portable_record({**record, "model": {**spec_record, "dtype": dtype}}, folder)
    if base_model is not None:
        exported = {**exported, "base_model": base_model, "model": {**exported["model"], "name_or_path": base_model}}
    if adapter_only:
        shutil.copytree(folder, tmp, ignore=shutil.ignore_patterns(CHECKPOINT_FILE, CARD_FILE))
        for config in [tmp / ADAPTER_CONFIG, *tmp.glob(f"*/{ADAPTER_CONFIG}")]:
            data = read_json(config, f"restore {folder} (train the run again, or copy it back)")
            data["base_model_name_or_path"] = base_model or portable_name(data.get("base_model_name_or_path")
                                                                          or record["base_model"])
            config.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    else:
        model.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code).save_pretrained(tmp)
        exported["merged_from"] = exported["exported_from"]
    _drop_local_paths(tmp)
    (tmp / CHECKPOINT_FILE).write_text(json.dumps(exported, indent=2) + "\n", encoding="utf-8")
    card = export_card(exported, evaluations.section(), evaluations.eval_results(), name)
    (tmp / CARD_FILE).write_text(card, encoding="utf-8")


def check_base_model(base_model: str) -> None:
    """Refuse a ``--base-model`` that is neither a model folder here nor a hub id (``owner/name``)."""
    path = Path(base_model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ExportError(f"--base-model {base_model}: the folder holds no config.json, so no tool can load it as "
                              "the base; give the base model's folder or its hub id (owner/name)")
        return
    if not is_hub_id(base_model):
        raise ExportError(f"--base-model {base_model!r} is no folder here and no hub id (owner/name); give the base "
                          "model's folder or its hub id")


def _drop_local_paths(folder: Path) -> None:
    """Remove the local paths that ``save_pretrained`` records (``_name_or_path`` in ``config.json``,
    ``name_or_path`` in ``tokenizer_config.json``): the export names its sources in its own record."""
    for name, key in (("config.json", "_name_or_path"), ("tokenizer_config.json", "name_or_path")):
        file = folder / name
        if file.is_file():
            data = read_json(file, "export again from the run folder")
            if isinstance(data.get(key), str) and Path(data[key]).is_absolute():
                data.pop(key)
                file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def check_export_output(out: Path, checkpoint: Path, overwrite: bool) -> None:
    """Refuse an ``--out`` export may not replace: anything that holds or contains another opct output
    (a run, a checkpoint, an eval, an attack, an experiment) or the checkpoint exported, and any
    non-empty folder that is not an earlier export; an earlier export only with ``overwrite``."""
    if out.is_symlink():
        target = os.readlink(out)
        state = "" if out.exists() else ", which does not exist"
        raise ExportError(f"--out {out} is a symbolic link (to {target}{state}); an export replaces its folder whole, "
                          "so give the real folder's path, or a new one")
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; choose a folder")
    try:
        owner = check_output(out, "export", "--out")
    except OpctError as err:
        raise ExportError(str(err)) from None
    if out.resolve() in checkpoint.resolve().parents:
        raise ExportError(f"--out {out} contains the checkpoint {checkpoint}; replacing it would delete the run. "
                          "Choose a folder of its own, e.g. the run directory's merged/.")
    if owner is not None:
        if not overwrite:
            raise ExportError(f"--out {out} is not empty: it holds {owner.describe()}; --overwrite replaces it, or "
                              "choose another folder")
        return
    if out.exists() and any(out.iterdir()):
        found = ", ".join(sorted(p.name for p in out.iterdir())[:5])
        raise ExportError(f"--out {out} exists and holds files that are no opct export ({found}); --overwrite replaces only "
                          "an earlier export. Choose an empty or new folder.")


class HubPushError(OpctError, RuntimeError):
    """The hub refused or failed an upload (a fault: exit 1); a missing login is an :class:`ExportError`."""

    exit_code = 1


def hub_token(token: str | None = None) -> str:
    """The hub token to push with: ``token``, else the one ``huggingface_hub`` finds (``HF_TOKEN``, ``hf auth
    login``); :class:`ExportError` when there is none, before anything is merged or written."""
    from huggingface_hub import get_token

    found = token or get_token()
    if not found:
        raise ExportError("--push-to-hub needs a Hugging Face token and none is set: run `hf auth login` or set "
                          "HF_TOKEN to a token with write access, then rerun")
    return found


def push_to_hub(folder: str | Path, repo_id: str, *, private: bool = False, token: str | None = None,
                commit_message: str | None = None) -> str:
    """Upload the export ``folder`` to the hub model repository ``repo_id`` (created if missing, ``private``
    if asked); returns the repository's URL. No token: :class:`ExportError`; a hub error (a token without
    write access, a name taken by someone else, the network): :class:`HubPushError` naming the repository."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, HFValidationError

    folder = Path(folder)
    if not (folder / CHECKPOINT_FILE).is_file():
        raise ExportError(f"{folder} is no opct export (no {CHECKPOINT_FILE}); export it first with --out")
    api = HfApi(token=hub_token(token))
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model",
                          commit_message=commit_message or f"opct export of {folder.name}")
    except HFValidationError as err:
        raise ExportError(f"--push-to-hub {repo_id!r} is no valid repository id ({err}); use owner/name") from None
    except (HfHubHTTPError, OSError) as err:
        raise HubPushError(f"pushing {folder} to the hub repository {repo_id} failed: {err}. Check that your token "
                           "may write to it (`hf auth whoami`), then rerun; the export in the folder is kept") from err
    return str(url)
