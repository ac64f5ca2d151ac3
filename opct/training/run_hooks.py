"""Run-start hooks: what :func:`opct.training.loop.train` calls once a run's model, teacher and pairs are ready,
before its first step.

A hook is registered by name in :data:`RUN_START_HOOKS` (a :class:`~opct.registry.Registry`, so a
``"module:attr"`` string is imported on first use) as a :class:`RunStartHook` or a plain function of a
:class:`RunStart`. The rules:

- **When.** A run that starts at step 0 calls every hook after the method's ``setup`` and before step 1 (the
  policy is still the frozen teacher's weights plus an untrained adapter). A run resumed from a checkpoint calls
  a hook's ``resume`` instead, or nothing where it has none: a hook runs once per run, at its start.
- **Order.** Registration order: the built-in ``off_policy_profile`` (:mod:`opct.training.run_profile`) first,
  then the hooks registered after ``import opct``, in the order they were registered.
- **Processes.** Every process calls every hook, so that a hook may use the accelerator's collectives
  (``wait_for_everyone``, ``gather``); a hook that writes a file does so on the main process
  (:attr:`RunStart.is_main_process`). The manifest records the main process's return value.
- **Records.** A hook with ``record_as`` has its return value written into the run's ``manifest.json``
  under that key; a hook without one records nothing there (it may write its own file in
  :attr:`RunStart.run_dir`).

A hook must leave the weights and the global random state as it found them: a run trains the same with or
without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelerate import Accelerator

from opct.config import RunConfig
from opct.methods.base import TrainContext
from opct.pairs import ConsistencyPair
from opct.registry import Registry
from opct.runs.directory import RunDirectory


@dataclass(frozen=True)
class RunStart:
    """What a run-start hook is given: the run's context (models, tokenizer, teacher, accelerator), its
    directory, and its training and validation pairs (after the prompt checks)."""

    ctx: TrainContext
    run: RunDirectory
    pairs: list[ConsistencyPair]
    validation: list[ConsistencyPair]

    @property
    def cfg(self) -> RunConfig:
        """The run's configuration."""
        return self.ctx.cfg

    @property
    def run_dir(self) -> Path:
        """The run's directory."""
        return self.run.root

    @property
    def accelerator(self) -> Accelerator:
        """The run's accelerator (processes, device, collectives)."""
        return self.ctx.accelerator

    @property
    def is_main_process(self) -> bool:
        """Whether this is the main process (rank 0), the one that writes files."""
        return self.ctx.accelerator.is_main_process

    @property
    def process_index(self) -> int:
        """This process's rank."""
        return self.ctx.accelerator.process_index


@dataclass(frozen=True)
class RunStartHook:
    """A run-start hook: ``start`` is called when a run starts at step 0; ``resume``, when given, instead when it
    resumes from a checkpoint (to recall what ``start`` measured). ``record_as``: the manifest key their return
    value is recorded under (None: not recorded)."""

    start: Callable[[RunStart], Any]
    resume: Callable[[RunStart], Any] | None = None
    record_as: str | None = None


#: ``name -> RunStartHook`` (or a plain function of a :class:`RunStart`, called at the start only and recording
#: nothing in the manifest). Called in registration order by every training run.
RUN_START_HOOKS: Registry = Registry("run-start hook")
RUN_START_HOOKS.register("off_policy_profile", "opct.training.run_profile:OFF_POLICY_PROFILE")


def _as_hook(entry: RunStartHook | Callable[[RunStart], Any]) -> RunStartHook:
    return entry if isinstance(entry, RunStartHook) else RunStartHook(start=entry)


def registered_hooks() -> Iterator[tuple[str, RunStartHook]]:
    """``(name, hook)`` for every registered hook, in registration order."""
    for name, entry in RUN_START_HOOKS.items():
        yield name, _as_hook(entry)


def run_start_hooks(start: RunStart, resumed: bool) -> dict[str, Any]:
    """Call every registered hook, in registration order (``resume`` for a resumed run, where a hook has one);
    returns the records of those with ``record_as``, by that key."""
    records: dict[str, Any] = {}
    for _, hook in registered_hooks():
        call = hook.resume if resumed else hook.start
        if call is None:
            continue
        result = call(start)
        if hook.record_as is not None:
            records[hook.record_as] = result
    return records
