r"""Judge an experiment's organism sycophancy records again with today's multiple-choice judge, and say which
answers read differently from what the records hold (docs/mechanism.md, amendment (b)).

Usage::

    python benchmarks/rejudge_sycophancy.py EXPERIMENT_DIR [--json]

It reads every ``eval/<model>/sycophancy*/samples.jsonl`` record the organism's judge (``organism-mc``) wrote,
judges its response again from its own ``meta`` (no model runs), and prints the records per eval and each one
whose reading moved (the letter, ``off_options`` or ``unparsed``). It writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from opct.organism.judges import JUDGES

RECORDS = "eval/*/sycophancy*/samples.jsonl"


def reading(record: dict[str, Any]) -> str:
    """The reading a record holds: its parsed letter or ``off_options``, else ``unparsed``."""
    return record["parsed"] if record.get("parsed") is not None else "unparsed"


def rejudge(root: Path) -> dict[str, Any]:
    """``{"records": {eval folder: count}, "moved": [{eval, item_id, variant, before, after, response}]}``."""
    judge = JUDGES["mc"]
    counts: Counter[str] = Counter()
    moved = []
    for path in sorted(root.glob(RECORDS)):
        where = str(path.parent.relative_to(root))
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("judge") != judge.name:
                continue
            counts[where] += 1
            after = judge.judge("", record["response"], record["meta"]).label
            if after != reading(record):
                moved.append({"eval": where, "item_id": record["item_id"], "variant": record["variant"],
                              "before": reading(record), "after": after, "response": record["response"]})
    return {"records": dict(counts), "moved": moved}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", type=Path, help="an experiment folder (the one with eval/)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = rejudge(args.experiment)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for where, n in result["records"].items():
        print(f"{where}: {n} records")
    print(f"{sum(result['records'].values())} records, {len(result['moved'])} read differently")
    for m in result["moved"]:
        print(f"  {m['eval']} {m['item_id']} {m['variant']}: {m['before']} -> {m['after']}: {m['response'][:100]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
