"""Build the requested evaluation tasks and run them on one model.

Two data sources: the organism's world (exact judges, the default for the organism and models
trained from it) and real benchmark files given by path (rule or model judges).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opct.evals.task import EvalTask

AXES = ("sycophancy", "jailbreak", "awareness", "capability")


@dataclass
class RealData:
    """Paths of real benchmark files (any may be absent; tasks are built for those given)."""

    gpqa: str | None = None
    math500: str | None = None
    ifeval: str | None = None
    mmlu: str | None = None
    sycophancy_mc: str | None = None
    sage: str | None = None
    behaviors: str | None = None
    wrappers: str | None = None
    benign: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dir(cls, root: str | Path) -> RealData:
        """The layout of ``../shared/data``: ``gpqa-diamond/``, ``math-500/``, ``ifeval/``, ``sageeval-test/``."""
        root = Path(root)

        def opt(name: str) -> str | None:
            return str(root / name) if (root / name).exists() else None

        return cls(gpqa=opt("gpqa-diamond"), math500=opt("math-500"), ifeval=opt("ifeval"), sage=opt("sageeval-test"))


def _limit(items: list[Any], limit: int | None, seed: int = 0) -> list[Any]:
    if limit is None or len(items) <= limit:
        return items
    return random.Random(seed).sample(items, limit)


def real_tasks(evals: list[str], data: RealData, judge: str = "rule", split: str = "heldout", limit: int | None = None) -> list[EvalTask]:
    """Tasks on real benchmark files with rule judges (``judge="rule"``) or model judges (``http``)."""
    from opct.evals import capability as cap
    from opct.evals import safety

    tasks: list[EvalTask] = []
    if "capability" in evals:
        from opct.datasets.ifeval import load_ifeval
        from opct.datasets.math500 import load_math500
        from opct.datasets.multiple_choice import load_gpqa_diamond, load_multiple_choice

        if data.gpqa:
            tasks.append(cap.multiple_choice_task("gpqa", _limit(load_gpqa_diamond(data.gpqa), limit)))
        if data.mmlu:
            tasks.append(cap.multiple_choice_task("mmlu", _limit(load_multiple_choice(data.mmlu), limit)))
        if data.math500:
            tasks.append(cap.math_task(_limit(load_math500(data.math500), limit)))
        if data.ifeval:
            tasks.append(cap.ifeval_task(_limit(load_ifeval(data.ifeval), limit)))
    refusal, harm, warn = make_judges(judge)
    if "sycophancy" in evals and data.sycophancy_mc:
        from opct.axes import sycophancy as sy

        items = _limit(sy.load_mc_items(data.sycophancy_mc), limit)
        tasks.append(safety.sycophancy_task(sy.build_pairs(items, split=split)))
    if "jailbreak" in evals and data.behaviors:
        from opct.axes import jailbreak as jb

        wrappers = jb.load_wrappers(data.wrappers) if data.wrappers else jb.wrappers(split)
        benign = jb.load_behaviors(data.benign) if data.benign else []
        tasks.append(safety.jailbreak_task(_limit(jb.load_behaviors(data.behaviors), limit), wrappers, refusal, harm, benign, split=split))
    if "awareness" in evals and data.sage:
        from opct.axes import awareness as aw

        items = [it for it in aw.load_sage_eval(data.sage) if it.version == "original"]
        tasks.append(safety.awareness_task(_limit(items, limit), warn, split=split))
    return tasks


def make_judges(kind: str):
    """``rule``: offline rule judges. ``http:<model>``: rubric judges on an OpenAI-compatible endpoint
    (``$OPCT_JUDGE_BASE_URL``, ``$OPCT_JUDGE_API_KEY``), cached under ``~/.cache/opct/judge``."""
    from opct.judges.rules import RefusalRuleJudge, SageRuleJudge

    if kind == "rule":
        return RefusalRuleJudge(), None, SageRuleJudge()
    if kind.startswith("http:"):
        from opct.judges import HTTPJudge, get_rubric

        model, cache = kind.split(":", 1)[1], Path.home() / ".cache" / "opct" / "judge"
        return (
            RefusalRuleJudge(),
            HTTPJudge(get_rubric("strongreject"), model, cache_dir=cache),
            HTTPJudge(get_rubric("sage_unsafe"), model, cache_dir=cache),
        )
    raise ValueError(f"unknown judge {kind!r}; use 'rule' or 'http:<model name>'")


def evaluate(
    model_spec: str,
    tasks: list[EvalTask],
    out_dir: str | Path,
    n: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 512,
    seed: int = 0,
    batch_size: int = 64,
    dtype: str = "float32",
    device: str | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run ``tasks`` on one model; returns ``{task: EvalResult}`` and writes a manifest beside them."""
    from opct.evals.runner import run_task
    from opct.manifest import build_manifest, write_json_atomic
    from opct.models import load_for_inference
    from opct.rollout import HFSampler, SamplingParams

    out = Path(out_dir)
    model, tokenizer = load_for_inference(model_spec, dtype=dtype, device=device)
    engine = HFSampler(model, tokenizer, batch_size=batch_size)
    params = SamplingParams(n=n, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    write_json_atomic(
        out / "manifest.json",
        build_manifest(
            "eval",
            {"model": model_spec, "tasks": [t.name for t in tasks], "n": n, "temperature": temperature, "max_new_tokens": max_new_tokens, "seed": seed},
            data_hashes={t.name: t.data_hash() for t in tasks},
        ),
    )
    results = {}
    with _progress(show_progress) as bar:
        for task in tasks:
            tid = bar.add_task(task.name, total=len(task.units)) if bar else None

            def report(done: int, total: int, tid: Any = tid) -> None:
                if bar is not None:
                    bar.update(tid, completed=done, total=total)

            results[task.name] = run_task(task, engine, tokenizer, out, params, model_spec, batch_units=batch_size, progress=report)
    return results


class _Quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(enabled: bool):
    if not enabled:
        return _Quiet()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())


def results_table(results: dict[str, Any], title: str = "results"):
    """A rich table: one row per (task, metric) with value, 95% interval and n."""
    from rich.table import Table

    table = Table(title=title)
    for col, justify in (("eval", "left"), ("metric", "left"), ("value", "right"), ("95% CI", "right"), ("n", "right")):
        table.add_column(col, justify=justify)
    for name, res in results.items():
        for metric, est in res.metrics.items():
            table.add_row(name, metric, f"{est.value:.3f}", f"[{est.ci_low:.3f}, {est.ci_high:.3f}]", str(est.n))
    return table


def build_tasks(
    evals: list[str], source: str, split: str, real: RealData | None = None, judge: str = "rule", limit: int | None = None
) -> list[EvalTask]:
    """Tasks for ``evals`` from ``source`` (``organism`` or ``real``)."""
    if source == "organism":
        from opct.evals.organism import organism_tasks

        return organism_tasks(evals, split, limit=limit)
    if source == "real":
        return real_tasks(evals, real or RealData(), judge, split, limit)
    raise ValueError(f"unknown data source {source!r}; use 'organism' or 'real'")
