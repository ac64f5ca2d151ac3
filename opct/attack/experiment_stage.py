"""The attack stage of an experiment: ``attack.strategy``'s attacker with the same behaviours, budget, judge and seed
for every model."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.markup import escape

from opct.attack.attackers import ATTACKERS, AttackConfig, first_problem, run_attack
from opct.errors import OpctError


def real_data(cfg: Any) -> dict[str, Any]:
    """The attack's real-data files from the experiment's ``eval.real`` (its behaviours, and wrappers if given)."""
    if cfg.eval.data != "real":
        return {}
    paths = cfg.eval.real_paths()
    return {"behaviors": paths["behaviors"], "wrappers": paths.get("wrappers")}


def attack_config(cfg: Any) -> AttackConfig:
    """The :class:`~opct.attack.attackers.AttackConfig` every model of the experiment ``cfg`` is attacked with (its
    ``model`` and ``out`` set per model by :func:`attack_models`): ``attack.strategy``'s attacker with the
    experiment's attack settings and its eval's data, judge, reasoning and unscored share. Building it runs the
    attacker's own ``check``; a ``ValidationError`` (a ``ValueError``) for settings it cannot measure with."""
    return AttackConfig(strategy=cfg.attack.strategy, data=cfg.eval.data, judge=cfg.eval.judge, budget=cfg.attack.budget,
                        threshold=cfg.attack.threshold, seed=cfg.attack.seed, static=cfg.attack.static_baseline,
                        limit=cfg.attack.limit, reasoning=cfg.eval.reasoning, max_unscored=cfg.eval.max_unscored,
                        search=cfg.attack.search, generation=cfg.attack.generation, discard_stale=True, **real_data(cfg))


def check_attack_settings(cfg: Any) -> None:
    """Refuse, before anything trains, attack settings that ``attack.strategy``'s attacker cannot measure with
    (:class:`AttackSettingsError`, its own sentence)."""
    try:
        attack_config(cfg)
    except ValidationError as err:
        raise AttackSettingsError(f"attack.strategy {cfg.attack.strategy}: {first_problem(err)}") from None


class AttackSettingsError(OpctError, ValueError):
    """An experiment's attack settings that its attacker (``attack.strategy``) refuses."""


def attack_models(cfg: Any, models: dict[str, Any], out_root: Path, log: Any = print, show_progress: bool = True) -> list[str]:
    """Attack every model of the plan (``models``: key -> model spec) with ``attack.strategy``'s attacker of
    :data:`~opct.attack.attackers.ATTACKERS` (``search`` unless set), through :func:`attack_config`, the
    :class:`~opct.attack.attackers.AttackConfig` that ``opct attack --strategy`` builds, and
    :func:`~opct.attack.attackers.run_attack`; results under ``out_root/<key>/``.

    On the organism: its held-out behaviours with its exact harm judge. On real data: the behaviours
    file of ``eval.real.behaviors`` (and ``wrappers`` if given) with the eval's judge. An attack already
    there is reused when it measured the same weights with the same settings, continued when it was
    interrupted, and run again from scratch otherwise (other weights or settings: ``discard_stale``). Returns one
    line per incomplete attack (more unscored behaviours than ``eval.max_unscored``).
    """
    config = attack_config(cfg)
    unfinished = []
    for key, spec in models.items():
        log(f"[stage] attack {key}")
        target = {"model": spec} if isinstance(spec, str) else {"target": spec}  # a name, or a spec given whole
        one = config.model_copy(update={**target, "out": out_root / key})
        with rounds_progress(show_progress, f"attack {key} (rounds)", ATTACKERS.get(one.strategy)().rounds(one)) as report:
            path = run_attack(one, report)
        res = json.loads(path.read_text(encoding="utf-8"))
        if res.get("status") == "incomplete":
            unfinished.append(f"attack/{key}: {res['outcomes']['behaviors']['unscored']} of {res['n']} behaviours unscored")
    return unfinished


@contextmanager
def rounds_progress(enabled: bool, description: str, total: int) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar over an attack's rounds while the block runs: yields the ``progress(done, total)``
    callback the attackers take, or ``None`` (no bar) when not ``enabled``. ``description`` (it may hold a
    model's path) is shown as written, never read as markup."""
    with _progress(enabled) as bar:
        if bar is None:
            yield None
            return
        task = bar.add_task(escape(description), total=total)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _progress(enabled: bool):
    if not enabled:
        return nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
