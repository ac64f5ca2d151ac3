"""What a trained checkpoint (``final/``) says about itself: ``opct_checkpoint.json`` and a model card.

``opct_checkpoint.json`` records the model spec the run trained with (chat template, its kwargs and
system prompt, so evaluation renders the same token ids), the base model's resolved identity (an
alias, an absolute path, or a hub id with its revision) and a sha256 of every base weight, so a
checkpoint whose base changed underneath it is refused rather than silently evaluated.
``README.md`` is a Hugging Face model card, built with ``huggingface_hub``'s ``ModelCard`` and
``ModelCardData`` (its ``model-index`` from ``EvalResult``s), so the hub's schema is the library's: YAML
front matter the hub reads (:func:`card_metadata`:
``base_model`` when the base is a hub id, ``library_name``, ``tags``, ``datasets``, the base's
``license`` when its own card says it), then method, base model, data, configuration, and an
Evaluation section saying where evaluations are. Nothing rewrites the card after training: ``opct
eval`` never writes into the checkpoint it measures (it writes the section, for these weights, into its
own output as ``model_card_eval.md``), so a finished run rebuilt as it was (a no-op rerun) rewrites
the same card and loses nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from opct.config import MODEL_ALIASES, ModelConfig, RunConfig, dump_config
from opct.errors import read_text
from opct.runs.layout import CHECKPOINT_FILE

CARD_FILE = "README.md"
EVAL_MARKER = "## Evaluation"
FORMAT = 2
#: ``org/name`` or ``name``: what a hub id (model or dataset) looks like.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
#: ``prefix:argument`` of a registered pair source (``organism:sycophancy:train``), a name, not a path.
_NAMED_SOURCE = re.compile(r"^[a-z][\w-]*:[\w.:-]+$")
#: A name ending so is a file (``attacker:pairs.jsonl``, ``data/pairs.jsonl``), never a dataset to list.
_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".arrow", ".txt", ".gz")
#: The card's Evaluation section: evaluations are kept beside their records, never in this folder.
NOT_HERE = ("Evaluations are not written into this folder. `opct eval --model <this folder> --out DIR` writes this "
            "section, with the sha256 of the weights it measured, to `DIR/model_card_eval.md`; paste it here to publish it.")


def base_identity(name_or_path: str) -> str:
    """An alias as is, a local folder as its absolute path, anything else (a hub id) as is."""
    if name_or_path in MODEL_ALIASES:
        return name_or_path
    path = Path(name_or_path).expanduser()
    return str(path.resolve()) if path.exists() else name_or_path


def resolved_spec(spec: ModelConfig) -> ModelConfig:
    """``spec`` with its base identity resolved and a chat-template file read into its text."""
    template = spec.chat_template
    if template and "{" not in template and Path(template).is_file():
        template = read_text(template)
    return spec.model_copy(update={"name_or_path": base_identity(spec.name_or_path), "chat_template": template})


def checkpoint_record(cfg: RunConfig, base_weights: str, data_hash: str, num_pairs: int) -> dict[str, Any]:
    """The content of ``opct_checkpoint.json`` for a run."""
    spec = resolved_spec(cfg.model)
    return {
        "format": FORMAT,
        "method": cfg.method,
        "finetune": cfg.finetune,
        "base_model": spec.name_or_path,
        "revision": spec.revision,
        "base_weights_sha256": base_weights,
        "model": spec.model_dump(mode="json"),
        "data": {"sources": list(cfg.data.train), "hash": data_hash, "pairs": num_pairs},
    }


def loadable_base(name_or_path: str) -> str:
    """How an adapter's ``adapter_config.json`` names its base: an alias by its name (``organism``, resolved
    by opct on any machine, never the installed package's folder), a local folder as its absolute path, a
    hub id as is. The recorded sha256 of the base's weights refuses any other base the name resolves to."""
    return base_identity(name_or_path)


def is_hub_id(name: str) -> bool:
    """Whether ``name`` (a recorded base or a data source) is a hub id: not an alias, not a local path."""
    return (name not in MODEL_ALIASES and bool(_HUB_ID.match(name)) and name.count("/") <= 1
            and not Path(name).expanduser().exists())


def _base_license(record: dict[str, Any]) -> str | None:
    """The ``license`` in the base model's own card: a local folder's ``README.md``, or a hub base's card
    when it is in the local hub cache (never a download). ``None`` when not known."""
    base = record["base_model"]
    card: str | Path | None = None
    if base in MODEL_ALIASES:
        card = Path(MODEL_ALIASES.get(base)()) / CARD_FILE
    elif Path(base).is_dir():
        card = Path(base) / CARD_FILE
    elif is_hub_id(base):
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(base, CARD_FILE, revision=record.get("revision"))
        card = Path(found) if isinstance(found, str) else None
    if card is None or not card.is_file():
        return None
    from huggingface_hub.repocard import metadata_load

    try:
        license_ = (metadata_load(card) or {}).get("license")
    except (ValueError, OSError, yaml.YAMLError):
        return None
    return license_ if isinstance(license_, str) and license_ else None


def card_metadata(record: dict[str, Any]) -> dict[str, Any]:
    """The card's YAML front matter (Hugging Face ``ModelCardData`` fields) from a checkpoint record:
    ``base_model`` (a hub id only: an alias or a local folder is no hub id and is named in the text),
    ``library_name`` (``peft`` for an adapter, ``transformers`` for a complete model), ``tags`` (opct,
    consistency-training, the method), ``datasets`` (the training sources that are hub ids or named
    sources, never a local file), ``license`` (the base card's, only when it says one)."""
    adapter = record["finetune"] == "lora" and "merged_from" not in record
    meta: dict[str, Any] = {}
    if is_hub_id(record["base_model"]):
        meta["base_model"] = record["base_model"]
    meta["library_name"] = "peft" if adapter else "transformers"
    meta["tags"] = list(dict.fromkeys(["opct", "consistency-training", record["method"]]))
    sources = [s for s in record["data"]["sources"] if not s.lower().endswith(_FILE_SUFFIXES)
               and (_NAMED_SOURCE.match(s) or (is_hub_id(s) and "/" in s))]
    if sources:
        meta["datasets"] = sources
    license_ = _base_license(record)
    if license_:
        meta["license"] = license_
    return meta


def card_text(record: dict[str, Any], body: list[str], eval_results: list[EvalResult] | None = None,
              model_name: str | None = None) -> str:
    """The whole card: :func:`card_metadata` as ``ModelCardData`` (with its ``model-index`` from
    ``eval_results`` under ``model_name``, when given) in YAML front matter, then the Markdown ``body``."""
    data = ModelCardData(**card_metadata(record), eval_results=eval_results or None,
                         model_name=model_name if eval_results else None)
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body)))


def _adapter_base_arg(base: str) -> str:
    """lm-eval's ``pretrained=`` for an adapter's base: an alias's folder is printed by opct."""
    if base in MODEL_ALIASES:
        return f"$(python -c \"from opct.models import resolve_model_path; print(resolve_model_path('{base}'))\")"
    return base


def _provenance(record: dict[str, Any]) -> list[str]:
    """The card's lines on where the weights come from: base, its sha256, training data."""
    revision = f" (revision `{record['revision']}`)" if record["revision"] else ""
    return [
        f"- base model: `{record['base_model']}`{revision}",
        f"- base weights sha256: `{record['base_weights_sha256']}`",
        f"- training data: {', '.join(f'`{s}`' for s in record['data']['sources'])} "
        f"({record['data']['pairs']} pairs, hash `{record['data']['hash']}`)",
    ]


def _how_to_load(adapter_base: str | None) -> list[str]:
    """The card's lines on loading the folder with transformers, opct and lm-eval-harness
    (``adapter_base``: where the base of an adapter folder is; None for a complete model folder)."""
    if adapter_base is not None:
        return [
            "Load it with `transformers` (`AutoModelForCausalLM`, then `peft.PeftModel.from_pretrained`) or "
            "evaluate it with `opct eval --model <this folder>`. With lm-eval-harness: `lm_eval --model hf "
            f"--model_args pretrained={_adapter_base_arg(adapter_base)},peft=<this folder>,tokenizer=<this folder> ...` (the tokenizer "
            "here carries the chat template the run trained with); `opct export <this folder> --out DIR` "
            "writes the adapter merged into its base as one model folder.",
        ]
    return [
        "Load it with `transformers` (`AutoModelForCausalLM`) or evaluate it with `opct eval --model <this "
        "folder>`. With lm-eval-harness: `lm_eval --model hf --model_args pretrained=<this folder> ...`.",
    ]


def model_card(cfg: RunConfig, record: dict[str, Any], eval_table: str | None = None) -> str:
    """A Markdown model card for the checkpoint."""
    tuning = "LoRA adapter" if cfg.finetune == "lora" else "full fine-tuning"
    lines = [
        f"# {cfg.name}",
        "",
        f"Trained with [opct](https://arxiv.org/abs/2605.21834) (`method: {cfg.method}`, {tuning}).",
        "",
        *_provenance(record),
        f"- seed: {cfg.seed}",
        "",
        *_how_to_load(loadable_base(cfg.model.name_or_path) if cfg.finetune == "lora" else None),
        "",
        "## Configuration",
        "",
        "```yaml",
        yaml.safe_dump(dump_config(cfg), sort_keys=False).rstrip(),
        "```",
        "",
        EVAL_MARKER,
        "",
        eval_table or NOT_HERE,
        "",
    ]
    return card_text(record, lines)


def export_card(record: dict[str, Any], evaluation: str | None = None,
                eval_results: list[EvalResult] | None = None, model_name: str | None = None) -> str:
    """The model card of an ``opct export`` folder (``record``: its ``opct_checkpoint.json``, with
    ``exported_from``, the checkpoint it was written from, and ``merged_from`` when the adapter was
    merged). ``evaluation`` and ``eval_results`` (the ``model-index``, under ``model_name``): the run's own
    eval results, when found (:mod:`opct.runs.publish`); else the Evaluation section says how to make them."""
    source = record["exported_from"]
    merged = "merged_from" in record
    adapter = record["finetune"] == "lora" and not merged
    what = ("its LoRA adapter merged into the base weights" if merged and record["finetune"] == "lora"
            else "its LoRA adapter, to load on its base" if adapter else "its fully fine-tuned weights")
    lines = [
        f"# {source.split('/')[0]} (exported)",
        "",
        f"The opct checkpoint `{source}` (`method: {record['method']}`) as one model folder: {what}, "
        f"in {record['model']['dtype']}, with the tokenizer and chat template it trained with (`opct export`).",
        "",
        *_provenance(record),
        "",
        *_how_to_load(record["base_model"] if adapter else None),
        "The training configuration is in the source checkpoint's model card.",
        "",
        EVAL_MARKER,
        "",
        evaluation or NOT_HERE,
        "",
    ]
    return card_text(record, lines, eval_results, model_name)


def write_final_files(folder: Path, cfg: RunConfig, base_weights: str, data_hash: str, num_pairs: int) -> None:
    """Write ``opct_checkpoint.json`` and ``README.md`` into a checkpoint folder."""
    record = checkpoint_record(cfg, base_weights, data_hash, num_pairs)
    (folder / CHECKPOINT_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (folder / CARD_FILE).write_text(model_card(cfg, record), encoding="utf-8")
