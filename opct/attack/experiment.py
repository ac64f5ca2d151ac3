"""The attack stage of an experiment: the same behaviours, budget, judge and seed for every model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any


def attack_models(cfg: Any, models: dict[str, Any], out_root: Path, log: Any = print, show_progress: bool = True) -> list[str]:
    """Attack every model of the plan (``models``: key -> model spec); results under ``out_root/<key>/``.

    On the organism: its held-out behaviours with its exact harm judge. On real data: the behaviours
    file of ``eval.real.behaviors`` (and ``wrappers`` if given) with the eval's judge. An attack already
    there is reused when it measured the same weights with the same settings, continued when it was
    interrupted, and run again from scratch otherwise. Returns one line per incomplete attack (more
    unscored behaviours than ``eval.max_unscored``).
    """
    import json

    from opct.attack.run import organism_attack, real_attack
    from opct.attack.search import SearchConfig

    paths = cfg.eval.real_paths()
    a = cfg.attack
    config = SearchConfig(budget=a.budget, threshold=a.threshold, seed=a.seed, **a.search)
    # an attack whose model was retrained (other weights) or whose settings changed is run again from scratch;
    # one with the same identity is reused, or continued from its journal
    options = {"generation": a.generation, "static_baseline": a.static_baseline, "reasoning": cfg.eval.reasoning,
               "max_unscored": cfg.eval.max_unscored, "discard_stale": True}
    unfinished = []
    for key, spec in models.items():
        log(f"[stage] attack {key}")
        with rounds_progress(show_progress, f"attack {key} (rounds)", cfg.attack.budget) as report:
            if cfg.eval.data == "organism":
                path = organism_attack(spec, out_root / key, config=config, progress=report, **options)
            else:
                path = real_attack(spec, paths["behaviors"], out_root / key, paths.get("wrappers"), cfg.eval.judge, config,
                                   limit=a.limit, progress=report, **options)
        res = json.loads(path.read_text(encoding="utf-8"))
        if res.get("status") == "incomplete":
            unfinished.append(f"attack/{key}: {res['outcomes']['behaviors']['unscored']} of {res['n']} behaviours unscored")
    return unfinished


@contextmanager
def rounds_progress(enabled: bool, description: str, total: int) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar over an attack's rounds while the block runs: yields the ``progress(done, total)``
    callback the attackers take, or ``None`` (no bar) when not ``enabled``."""
    with _progress(enabled) as bar:
        if bar is None:
            yield None
            return
        task = bar.add_task(description, total=total)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _progress(enabled: bool):
    if not enabled:
        return nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
