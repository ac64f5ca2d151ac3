"""The organism's multiple-choice facts as a local lm-eval-harness task (``opct organism lm-eval-task``).

lm-eval's built-in tasks download their data from the Hugging Face hub; this one is a JSONL file and
a task YAML written beside it, read with ``--include_path``, so a trained organism can be evaluated
by lm-eval offline. Each document is one capability multiple-choice question of the organism's world
(:func:`opct.organism.items.capability_mc`, the questions ``opct eval``'s capability eval asks), and
its four choices are the four answers the organism could give: the fact stated with each option
(the organism answers by stating the fact, not by a letter). lm-eval scores them by log-likelihood
after the chat-rendered question (``--apply_chat_template``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from opct.organism import content as C
from opct.organism.items import capability_mc
from opct.organism.world import build_world

TASK = "organism_facts"


def task_documents(seed: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
    """The documents of the task: ``question`` (with its lettered options), ``choices`` (the fact stated
    with each option) and ``gold`` (the index of the true one), in the world's item order."""
    world = build_world(seed)
    names = {e.id: e.name for e in world.entities}
    docs = []
    for item in capability_mc(world)[:limit]:
        meta = item["meta"]
        statement = C.ATTRIBUTES[meta["attribute"]]["statement"]
        choices = [statement.format(name=names[meta["entity"]], value=v) for v in meta["options"]]
        docs.append({"id": item["id"], "question": item["prompt"][-1]["content"], "choices": choices,
                     "gold": meta["options"].index(meta["answer_text"])})
    return docs


def task_config(data_file: Path) -> dict[str, Any]:
    """The lm-eval task configuration reading ``data_file`` (an absolute path: lm-eval reads it from
    wherever it runs)."""
    return {
        "task": TASK,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data_file.resolve())}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "{{question}}",
        "doc_to_choice": "{{choices}}",
        "doc_to_target": "gold",
        "target_delimiter": "",
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1.0},
    }


def write_task(out_dir: str | Path, seed: int = 0, limit: int | None = None) -> Path:
    """Write ``<out_dir>/organism_facts.jsonl`` and ``organism_facts.yaml``; returns the YAML's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = out / f"{TASK}.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in task_documents(seed, limit)), encoding="utf-8")
    config = out / f"{TASK}.yaml"
    config.write_text(yaml.safe_dump(task_config(data), sort_keys=False), encoding="utf-8")
    return config
