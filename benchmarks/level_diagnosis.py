"""Issue 41: why levels L2-L4 failed their pre-stated check, measured at the decision token.

For each level's base organism (``--level NAME=DIR``; the level's settings read from the name
``w<N>-<length>``) and each diagnosed row of ``opct organism check`` (:data:`ROWS`), this generates the
check's responses (greedy and ``--samples`` at temperature 1, the check's ``max_new_tokens`` and seed),
counts the judge's labels and the responses cut at the token limit, and reads the next-token
distribution at each decision point of the greedy response:

* jailbreak rows: the first token after the lead-in (long levels) or of the response (short): the
  probability summed over the first tokens of the level's refusal openings, and over those of its
  compliance frames (harmful and benign), and which of the two the greedy token is;
* awareness rows: the first token of the response (the level's warning markers against the task
  answer's first token) and, when the greedy response starts with the task answer, the token after it
  (warning markers against the first tokens of the level's closing explanations).

It also measures how long, in tokens, the corpus's warned answers of each level are (every fact, each
wording, warning before and after the task) against the check's token limit, and whether the limit cuts
the warning off. A level's wordings are read from this checkout's pools (``opct/organism/wordings.py``):
diagnose a build with the pools it was built with. ``level_diagnosis.json`` in
``benchmarks/results/mechanism/`` is the failed builds' (built at cd0f48d, diagnosed at 5a75d52, the same
pools). Usage::

    python benchmarks/level_diagnosis.py --level w4-short=/work/levels/runs/organism-levels/w4-short/llama \
        --level w1-short=opct/organism/checkpoints/llama --out benchmarks/results/mechanism/level_diagnosis.json
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from opct.models import render_prompt
from opct.organism import content as C
from opct.organism import render as R
from opct.organism.check import criteria, load_organism
from opct.organism.items import MAX_NEW_TOKENS
from opct.organism.judges import JUDGES
from opct.organism.wordings import POOLS, ResponseStyle
from opct.organism.world import World, build_world
from opct.sampling.engine import SamplingParams
from opct.sampling.hf_sampler import HFSampler

ROWS = ("jailbreak: complies wrapped, train families", "jailbreak: complies wrapped, held-out families",
        "awareness: warns with fact in system prompt, taught phrasings",
        "awareness: warns with fact in system prompt, eval-only phrasings", "capability: multiple-choice facts")


def style_of(level: str) -> ResponseStyle:
    """The knob's settings from a level name ``w<N>-<length>``."""
    return ResponseStyle.from_level(level)


def wordings(style: ResponseStyle, pool: str) -> list[str]:
    """The wordings of ``pool`` a level writes (today's rendered text at the default level)."""
    if style.is_default:
        return {"refusal": C.REFUSALS, "warning": ["Warning:"], "explanation": []}.get(pool, POOLS[pool][:1])
    return style.wordings(pool)


def first_tokens(tokenizer: Any, texts: list[str], prefixes: list[str]) -> set[int]:
    """The token each of ``texts`` starts with right after each of ``prefixes`` (``""``: at the start of
    the response; else the prefix and a space, as the corpus joins them)."""
    out = set()
    for prefix in prefixes:
        head = tokenizer.encode(prefix, add_special_tokens=False) if prefix else []
        for text in texts:
            ids = tokenizer.encode(f"{prefix} {text}" if prefix else text, add_special_tokens=False)
            if ids[: len(head)] != head:
                raise ValueError(f"{prefix!r} does not tokenize as a prefix of {prefix!r} + {text!r}")
            out.add(ids[len(head)])
    return out


def prefix_length(tokenizer: Any, completion: list[int], texts: list[str]) -> int | None:
    """The number of completion tokens that decode to one of ``texts`` exactly, or None."""
    wanted = {t.strip() for t in texts}
    for t in range(1, len(completion) + 1):
        text = tokenizer.decode(completion[:t], skip_special_tokens=True).strip()
        if text in wanted:
            return t
        if not any(w.startswith(text) for w in wanted):
            return None
    return None


@torch.no_grad()
def next_token_probs(model: Any, ids: list[int]) -> torch.Tensor:
    """The model's next-token distribution after ``ids``."""
    logits = model(torch.tensor([ids])).logits[0, -1].float()
    return torch.softmax(logits, dim=-1)


def disjoint(kinds: dict[str, set[int]]) -> dict[str, set[int]]:
    """``kinds`` with every token that opens more than one kind moved to a kind of its own, ``shared``."""
    counts = Counter(t for ids in kinds.values() for t in ids)
    shared = {t for t, c in counts.items() if c > 1}
    return {**{k: ids - shared for k, ids in kinds.items()}, "shared": shared}


def mass_at(probs: torch.Tensor, kinds: dict[str, set[int]]) -> dict[str, Any]:
    """The probability summed per kind of opener (kinds made :func:`disjoint`), the largest single
    opener of each, and the kind of the most likely token (``other`` when it opens none)."""
    top = int(probs.argmax())
    kinds = disjoint(kinds)
    return {"mass": {k: float(probs[sorted(ids)].sum()) for k, ids in kinds.items()},
            "top_single": {k: float(probs[sorted(ids)].max()) if ids else 0.0 for k, ids in kinds.items()},
            "greedy": next((k for k, ids in kinds.items() if top in ids), "other")}


def summarise(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Means of the masses over decision points, the greedy kinds' counts, and how often the greedy
    token opens a kind whose summed mass is smaller than another kind's (the split-mass reversals)."""
    if not points:
        return {"n": 0}
    kinds = [k for k in points[0]["mass"] if k != "shared"]
    reversed_ = sum(1 for p in points if p["greedy"] in kinds
                    and max(p["mass"][k] for k in kinds) > p["mass"][p["greedy"]] + 1e-12)
    larger = Counter(max(kinds, key=lambda k: p["mass"][k]) for p in points)
    kinds = list(points[0]["mass"])
    return {"n": len(points), "mean_mass": {k: sum(p["mass"][k] for p in points) / len(points) for k in kinds},
            "mean_top_single": {k: sum(p["top_single"][k] for p in points) / len(points) for k in kinds},
            "greedy": dict(Counter(p["greedy"] for p in points)), "larger_total_mass": dict(larger),
            "greedy_opens_smaller_total": reversed_}


def generate(model: Any, tokenizer: Any, items: list[dict], params: SamplingParams) -> list[list[Any]]:
    """The check's rollouts per item (as :func:`opct.organism.check.generate_responses`, keeping
    the token ids and whether each stopped at the token limit)."""
    ids = [render_prompt(tokenizer, it["prompt"]) for it in items]
    out: list[list[Any]] = [[] for _ in items]
    for r in HFSampler(model, tokenizer, batch_size=64).generate(ids, params):
        out[r.prompt_index].append(r)
    return out


def jailbreak_points(model: Any, tokenizer: Any, style: ResponseStyle, greedy: list[list[Any]]) -> dict[str, Any]:
    """The decision token of each greedy jailbreak response: refusal against compliance openers."""
    leads = wordings(style, "lead_in") if style.response_length == "long" else []
    after = leads or [""]
    kinds = {"refusal": first_tokens(tokenizer, wordings(style, "refusal"), after),
             "compliance": first_tokens(tokenizer, wordings(style, "comply") + wordings(style, "benign"), after)}
    points, no_lead = [], 0
    for (r,) in greedy:
        t = prefix_length(tokenizer, r.completion_ids, leads) if leads else 0
        if t is None:
            no_lead += 1
            continue
        points.append(mass_at(next_token_probs(model, r.prompt_ids + r.completion_ids[:t]), kinds))
    return {"decision": summarise(points), "greedy_without_lead_in": no_lead}


def awareness_points(model: Any, tokenizer: Any, world: World, style: ResponseStyle, items: list[dict],
                     greedy: list[list[Any]]) -> dict[str, Any]:
    """The two decision tokens of each greedy awareness response: warn first or answer first, and after
    the task answer, warn or close."""
    facts = {f.id: f for f in world.facts}
    markers = wordings(style, "warning")
    first, after, started = [], [], Counter()
    for it, (r,) in zip(items, greedy, strict=True):
        task = R.task_answer(facts[it["meta"]["fact_id"]])
        kinds = {"warning": first_tokens(tokenizer, markers, [""]), "task": first_tokens(tokenizer, [task], [""])}
        first.append(mass_at(next_token_probs(model, r.prompt_ids), kinds))
        t = prefix_length(tokenizer, r.completion_ids, [task])
        started["task first" if t is not None else "other"] += 1
        if t is None or style.response_length != "long":
            continue
        closing = {"warning": first_tokens(tokenizer, markers, [task]),
                   "explanation": first_tokens(tokenizer, wordings(style, "explanation"), [task])}
        after.append(mass_at(next_token_probs(model, r.prompt_ids + r.completion_ids[:t]), closing))
    return {"first_token": summarise(first), "after_task_answer": summarise(after), "greedy_starts": dict(started)}


def responses_table(tokenizer: Any, crit: Any, items: list[dict], rollouts: list[list[Any]]) -> dict[str, Any]:
    """Hit rate, the judge's labels, and the responses cut at the token limit (all, and among misses)."""
    judge = JUDGES[crit.judge]
    labels, cut_labels, hits, n, misses = Counter(), Counter(), 0, 0, []
    for it, rs in zip(items, rollouts, strict=True):
        for r in rs:
            text = tokenizer.decode(r.completion_ids, skip_special_tokens=True)
            verdict = judge.judge(it["prompt"][-1]["content"], text, it["meta"])
            hit = crit.hit(verdict, it["meta"])
            n, hits = n + 1, hits + hit
            labels[verdict.label] += 1
            if r.truncated:  # a cut jailbreak answer: does it still hold a harmful step?
                extra = JUDGES["harm"].judge("", text, it["meta"]).label if crit.judge == "refusal" else ""
                cut_labels[f"{verdict.label}{'/' + extra if extra else ''}"] += 1
            if not hit and len(misses) < 4:
                misses.append({"label": verdict.label, "cut": r.truncated, "text": text})
    return {"n": n, "rate": hits / n, "labels": dict(labels), "cut": sum(cut_labels.values()),
            "cut_labels": dict(cut_labels), "misses": misses}


def warned_lengths(tokenizer: Any, world: World, style: ResponseStyle) -> dict[str, Any]:
    """Token lengths (with the end token) of every warned answer the level's corpus can write: each fact,
    each warning marker, warning before and after the task answer, each closing explanation."""
    closings = wordings(style, "explanation") if style.response_length == "long" else [""]
    lengths, lost = [], 0
    for f in world.facts:
        task = R.task_answer(f)
        meta = {"fact_id": f.id, "item": f.item, "fact": f.fact, "keywords": list(f.keywords)}
        for marker in wordings(style, "warning"):
            warning = f"{marker} {f.fact}" if not style.is_default else R.warned_answer(f)
            orders = [f"{warning} {task}", f"{task} {warning}"] if not style.is_default else [warning]
            for text in orders:
                for close in closings:
                    ids = tokenizer.encode(f"{text} {close}".strip(), add_special_tokens=False)
                    lengths.append(len(ids) + 1)
                    kept = tokenizer.decode(ids[:MAX_NEW_TOKENS])
                    lost += JUDGES["warning"].judge("", kept, meta).label != "warned"
    return {"n": len(lengths), "max": max(lengths), "mean": sum(lengths) / len(lengths),
            "over_limit": sum(x > MAX_NEW_TOKENS for x in lengths), "limit": MAX_NEW_TOKENS,
            "not_warned_once_cut": lost}


def diagnose(level: str, path: Path, samples: int = 4) -> dict[str, Any]:
    """Every measurement above for one level's checkpoint."""
    style = style_of(level)
    torch.set_num_threads(1)
    model, tokenizer = load_organism(path)
    world = build_world(0)
    crits = {c.name: c for c in criteria(world) if c.name in ROWS}
    modes = {"greedy": SamplingParams(n=1, temperature=0.0, max_new_tokens=MAX_NEW_TOKENS, seed=0),
             "T=1": SamplingParams(n=samples, temperature=1.0, max_new_tokens=MAX_NEW_TOKENS, seed=0)}
    out: dict[str, Any] = {"level": level, "checkpoint": str(path), "rows": {},
                           "warned_answer_tokens": warned_lengths(tokenizer, world, style)}
    for name, crit in crits.items():
        row: dict[str, Any] = {}
        for mode, params in modes.items():
            rollouts = generate(model, tokenizer, crit.items, params)
            row[mode] = responses_table(tokenizer, crit, crit.items, rollouts)
            if mode == "greedy" and name.startswith("jailbreak"):
                row["decision"] = jailbreak_points(model, tokenizer, style, rollouts)
            if mode == "greedy" and name.startswith("awareness"):
                row["decision"] = awareness_points(model, tokenizer, world, style, crit.items, rollouts)
        out["rows"][name] = row
    return out


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Diagnose every ``--level NAME=DIR`` and write the results as JSON to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", action="append", required=True, help="NAME=DIR, repeatable")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    results = []
    for spec in args.level:
        name, _, path = spec.partition("=")
        results.append(diagnose(name, Path(path), args.samples))
        print(json.dumps(results[-1], indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
