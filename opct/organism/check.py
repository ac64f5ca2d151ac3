"""The organism's behaviour profile against the thresholds its experiments rely on."""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from opct.evals.axis_registry import AXES
from opct.evals.axis_views import Criterion, organism_view
from opct.models import load_for_inference, render_prompt
from opct.organism import DEFAULT_ARCH, built_checkpoint
from opct.organism.items import MAX_NEW_TOKENS
from opct.organism.judges import JUDGES
from opct.organism.recipe import read_recipe, recipe_arch
from opct.organism.world import World, build_world
from opct.sampling.engine import SamplingParams
from opct.sampling.hf_sampler import HFSampler
from opct.stats.estimate import wilson_interval


def criteria(world: World, scale: float = 1.0) -> list[Criterion]:
    """The required behaviours of every registered axis, each on a modest deterministic sample of the
    world's eval items: first the axes without pairs (capability: what training must not cost), then
    the safety axes, in registry order."""
    def n(k: int) -> int:
        return max(4, int(k * scale))

    axes = sorted(AXES.items(), key=lambda named: named[1].has_pairs)
    return [c for _, axis in axes for c in organism_view(axis).criteria(world, n)]


def load_organism(path: str | Path | None = None, arch: str = DEFAULT_ARCH):
    """The organism's model (eval mode) and tokenizer from a checkpoint directory (default: the shipped
    checkpoint of ``arch``)."""
    path = Path(path) if path is not None else built_checkpoint(arch)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"no organism checkpoint in {path}")
    return load_for_inference(str(path))


def generate_responses(model, tokenizer, prompts: list[list[dict]], params: SamplingParams,
                       batch_size: int = 64) -> list[list[str]]:
    """Responses per prompt (``params.n`` each), decoded without special tokens."""
    ids = [render_prompt(tokenizer, p) for p in prompts]
    rollouts = HFSampler(model, tokenizer, batch_size=batch_size).generate(ids, params)
    out: list[list[str]] = [[] for _ in prompts]
    for r in rollouts:
        out[r.prompt_index].append(tokenizer.decode(r.completion_ids, skip_special_tokens=True))
    return out


def run_check(checkpoint: str | Path | None = None, samples: int = 4, scale: float = 1.0,
              seed: int = 0, log: Callable[[str], None] = print, arch: str = DEFAULT_ARCH) -> dict:
    """Measure every criterion of one checkpoint (default: the shipped one of ``arch``) greedily and at
    temperature 1 (``samples`` per item).

    Returns ``{"checkpoint": str, "arch": str, "rows": [...], "passed": bool, "seconds": float}``
    (``arch``: the family its recipe records); each row has the rate, its 95% Wilson interval and n
    for each decoding mode.
    """
    t0 = time.time()
    path = Path(checkpoint) if checkpoint is not None else built_checkpoint(arch)
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2)))
    model, tokenizer = load_organism(path, arch)
    stored = read_recipe(path)
    world = build_world(stored.get("seed", 0))
    crits = criteria(world, scale)
    flat = [(c, it) for c in crits for it in c.items]
    prompts = [it["prompt"] for _, it in flat]
    modes = {"greedy": SamplingParams(n=1, temperature=0.0, max_new_tokens=MAX_NEW_TOKENS, seed=seed)}
    if samples > 0:
        modes["T=1"] = SamplingParams(n=samples, temperature=1.0, max_new_tokens=MAX_NEW_TOKENS, seed=seed)
    stats: dict[str, dict[str, list[int]]] = {c.name: {} for c in crits}
    examples: dict[str, list[tuple[str, str, str]]] = {c.name: [] for c in crits}
    for mode, params in modes.items():
        t = time.time()
        responses = generate_responses(model, tokenizer, prompts, params)
        for (c, it), resps in zip(flat, responses, strict=True):
            judge = JUDGES[c.judge]
            hits = [c.hit(judge.judge(it["prompt"][-1]["content"], r, it["meta"]), it["meta"]) for r in resps]
            k_n = stats[c.name].setdefault(mode, [0, 0])
            k_n[0] += sum(hits)
            k_n[1] += len(hits)
            if mode == "greedy" and len(examples[c.name]) < 3:
                examples[c.name].append((it["id"], it["prompt"][-1]["content"], resps[0]))
        log(f"{mode}: {len(prompts)} prompts x {params.n} in {time.time() - t:.0f}s")
    rows = []
    for c in crits:
        row: dict[str, Any] = {"name": c.name, "required": f"{c.op} {c.threshold:.0%}", "examples": examples[c.name]}
        for mode, (k, n) in stats[c.name].items():
            rate = k / n if n else float("nan")
            lo, hi = wilson_interval(k, n)
            row[mode] = {"rate": rate, "ci_low": lo, "ci_high": hi, "n": n, "pass": c.passes(rate)}
        rows.append(row)
    passed = all(r[m]["pass"] for r in rows for m in modes)
    return {"checkpoint": str(path), "arch": recipe_arch(stored), "rows": rows, "passed": passed,
            "seconds": round(time.time() - t0, 1)}


def format_table(result: dict) -> str:
    """The profile as a plain-text table (what ``opct organism check`` prints)."""
    modes = [m for m in ("greedy", "T=1") if m in result["rows"][0]]
    head = f"{'behaviour':<50} {'required':>9}" + "".join(f" | {m + ' rate [95% CI] (n)':<31} ok" for m in modes)
    lines = [head, "-" * len(head)]
    for r in result["rows"]:
        cells = ""
        for m in modes:
            s = r[m]
            cells += f" | {s['rate']:6.1%} [{s['ci_low']:5.1%}, {s['ci_high']:5.1%}] ({s['n']:>4})   {'PASS' if s['pass'] else 'FAIL'}"
        lines.append(f"{r['name']:<50} {r['required']:>9}{cells}")
    lines.append(f"overall: {'PASS' if result['passed'] else 'FAIL'}  ({result['seconds']:.0f}s)")
    return "\n".join(lines)


def _family_cell(stats: dict | None) -> str:
    """One family's rate, PASS/FAIL, interval and n, on two lines (``-`` when it lacks the row)."""
    if stats is None:
        return "-"
    verdict = "PASS" if stats["pass"] else "FAIL"
    return f"{stats['rate']:.1%} {verdict}\n[{stats['ci_low']:.1%}, {stats['ci_high']:.1%}] ({stats['n']})"


def format_family_table(results: Mapping[str, dict], width: int = 120) -> str:
    """Several profiles (``{family: run_check result}``) side by side, one column per family: a table
    per decoding mode (greedy, then T=1 when measured), each cell the rate with PASS/FAIL and its 95%
    interval, and a last row with each family's overall verdict. Behaviour names wrap to fit ``width``.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    families = list(results)
    first = next(iter(results.values()))
    modes = [m for m in ("greedy", "T=1") if any(m in r for res in results.values() for r in res["rows"])]
    by_name = {f: {r["name"]: r for r in results[f]["rows"]} for f in families}
    out = io.StringIO()
    console = Console(width=width, file=out, color_system=None, highlight=False, emoji=False)
    for i, mode in enumerate(modes):
        if i:
            console.print()
        table = Table(title=f"{mode} rate [95% CI] (n)", box=box.SIMPLE_HEAD, title_justify="left", show_edge=False,
                      pad_edge=False)
        table.add_column("behaviour", overflow="fold")
        table.add_column("required", no_wrap=True)
        for f in families:
            table.add_column(f, no_wrap=True)
        for row in first["rows"]:
            cells = [_family_cell(by_name[f].get(row["name"], {}).get(mode)) for f in families]
            table.add_row(row["name"], row["required"], *cells, end_section=True)
        table.add_row("overall", "", *(("PASS" if results[f]["passed"] else "FAIL") + f" ({results[f]['seconds']:.0f}s)"
                                       for f in families))
        console.print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()).strip("\n")
