"""Training checkpoints that opct writes and reads itself: nothing pickled, every file hashed.

``checkpoints/step-N/`` holds

* ``model.safetensors``: exactly the trainable parameters, by name (the adapter under LoRA);
* ``optimizer.safetensors``: the optimizer's per-parameter tensors, keyed ``<parameter name>/<state key>``;
* ``state.json``: the step, the optimizer's parameter order, param groups and non-tensor values, the
  learning-rate scheduler's state and the gradient scaler's;
* ``checkpoint.json``, written last: the step, and the size and sha256 of each file above.

A checkpoint is written under ``step-N.tmp`` (files synced to disk) and renamed, so a ``step-N`` folder
is complete unless the disk lost or changed data; a write that fails (a full disk) removes ``step-N.tmp``,
leaves the earlier checkpoints as they were and stops with an error naming the file. A resume uses the
newest checkpoint whose files match their hashes and whose ``state.json`` is a readable state, warning
when it skips a newer one. No RNG state is saved: the loop reseeds every global
generator from (seed, step, rank) before each step (``opct.training.batches.seed_step``), so nothing else is
needed for an exact resume. Loading is strict: a model file with a missing or extra tensor, or an
optimizer saved for other parameters, stops with a :class:`CheckpointError` naming the key.

The main process writes a checkpoint and every process reads it. Under DDP each process holds the whole
state; under FSDP (:mod:`opct.training.fsdp`, passed in as a :class:`ShardedState`) it is gathered whole on the main process first and sharded back
on load, so the files are the same whichever way the run was launched.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import torch
from accelerate import Accelerator
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from opct.runs.errors import CheckpointError, CheckpointWriteError, RunDirWarning
from opct.runs.layout import RunLayout, checkpoint_step, layout_of
from opct.runs.manifest import sha256_file

FORMAT = "opct-checkpoint-1"
MODEL, OPTIMIZER, STATE, META = "model.safetensors", "optimizer.safetensors", "state.json", "checkpoint.json"
REQUIRED = (MODEL, OPTIMIZER, STATE)


class ShardedState(Protocol):
    """How a sharded model's training state is gathered whole for a checkpoint and sharded back on load.

    :mod:`opct.training.fsdp` is one (the training loop passes the module itself under FSDP); this
    package never imports it."""

    def gather_train_state(self, model: torch.nn.Module, optimizer: Any) -> Any: ...

    def load_full_params(self, model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None: ...

    def load_full_optimizer(
        self, model: torch.nn.Module, optimizer: Any, order: list[str], state: dict[int, dict[str, Any]],
        groups: list[dict[str, Any]],
    ) -> None: ...


def list_checkpoints(run: RunLayout | Path) -> list[tuple[int, Path]]:
    """Every ``checkpoints/step-N`` folder of a run, oldest first (valid or not)."""
    return layout_of(run).list_checkpoints()


def _trainable(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def _parameter_order(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The names of the optimizer's parameters, in the order of its state dict's indices."""
    names = {id(p): n for n, p in _trainable(model).items()}
    order = [p for group in optimizer.param_groups for p in group["params"]]
    if any(id(p) not in names for p in order):
        raise RuntimeError("the optimizer holds a parameter that is not a trainable parameter of the model")
    return [names[id(p)] for p in order]


@contextmanager
def writing(file: Path) -> Iterator[None]:
    """Turn a failure to write ``file`` into an ``OSError`` naming it: safetensors' writer raises its own
    ``SafetensorError`` (a full disk reads ``... (os error 28)``), and a failed ``write`` names no file."""
    try:
        yield
    except SafetensorError as err:
        code = re.search(r"os error (\d+)|code: (\d+)", str(err))
        if code is None:
            raise
        number = int(code.group(1) or code.group(2))
        raise OSError(number, os.strerror(number), str(file)) from err
    except OSError as err:
        if err.filename is None:
            raise OSError(err.errno, err.strerror, str(file)) from err
        raise


def write_failure(err: OSError, what: str, kept: str) -> CheckpointWriteError:
    """The error of a checkpoint (``what``) that could not be written, saying what was ``kept``."""
    where = err.filename or what
    cause = "no space left on the device" if err.errno == errno.ENOSPC else (err.strerror or str(err))
    return CheckpointWriteError(
        f"{cause} writing {where}: {what} was not written, and nothing half-written was kept; {kept}. "
        + ("Free some space and rerun the same command to continue." if err.errno == errno.ENOSPC
           else "Fix the problem and rerun the same command to continue.")
    )


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(
    folder: Path, step: int, model: torch.nn.Module, optimizer: Any, scheduler: Any, scaler: Any, gathered: Any = None
) -> None:
    """Write the checkpoint files into ``folder`` (an empty, temporary folder), ``checkpoint.json`` last.

    ``gathered``: the state :func:`opct.training.fsdp.gather_train_state` gathered from a sharded model (its
    parameters, the optimizer's parameter order and state); None reads it from ``model`` and ``optimizer``.
    """
    if gathered is None:
        params, order, state = _trainable(model), _parameter_order(model, optimizer), optimizer.state_dict()
    else:
        params, order, state = gathered
    with writing(folder / MODEL):
        save_file({n: t.detach().contiguous().cpu() for n, t in params.items()}, str(folder / MODEL))
    tensors: dict[str, torch.Tensor] = {}
    values: dict[str, dict[str, Any]] = {}
    for index, per_param in state["state"].items():
        for key, value in per_param.items():
            if torch.is_tensor(value):
                tensors[f"{order[index]}/{key}"] = value.detach().contiguous().cpu()
            else:
                values.setdefault(order[index], {})[key] = value
    with writing(folder / OPTIMIZER):
        save_file(tensors, str(folder / OPTIMIZER))
    data = {
        "format": FORMAT,
        "step": step,
        "optimizer": {"parameters": order, "param_groups": state["param_groups"], "values": values},
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else None,
    }
    try:
        text = json.dumps(data, indent=1)
    except TypeError as err:  # a state holding tensors or objects: refuse rather than pickle
        raise CheckpointError(f"cannot store the optimizer/scheduler state of step {step} as JSON: {err}") from err
    with writing(folder / STATE):
        (folder / STATE).write_text(text + "\n", encoding="utf-8")
    files = {}
    for name in REQUIRED:
        with writing(folder / name):
            _sync(folder / name)
        files[name] = {"bytes": (folder / name).stat().st_size, "sha256": sha256_file(folder / name)}
    with writing(folder / META):
        (folder / META).write_text(json.dumps({"format": FORMAT, "step": step, "files": files}, indent=1) + "\n")
        _sync(folder / META)


def save_checkpoint(
    acc: Accelerator, run: RunLayout | Path, step: int, keep: int, model: torch.nn.Module, optimizer: Any,
    scheduler: Any, sharding: ShardedState | None = None,
) -> None:
    """Write ``checkpoints/step-<step>`` atomically (main process) and keep only the newest ``keep``.

    A write that fails (a full disk, an interruption) removes its temporary folder and leaves every
    earlier checkpoint as it was; a failed write is a :class:`~opct.runs.errors.CheckpointWriteError`
    naming the file. ``sharding``: how to gather a sharded model's state (collective: every process calls this)."""
    layout = layout_of(run)
    final, tmp = layout.checkpoint(step), layout.checkpoint_tmp(step)
    acc.wait_for_everyone()
    gathered = sharding.gather_train_state(model, optimizer) if sharding is not None else None
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            tmp.mkdir(parents=True)
            write_checkpoint(tmp, step, acc.unwrap_model(model), optimizer, scheduler, acc.scaler, gathered)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)
            if not isinstance(err, OSError):
                raise
            earlier = [path for done, path in layout.list_checkpoints() if done < step]
            kept = f"the earlier checkpoints are as they were (the newest: {earlier[-1]})" if earlier else "no earlier checkpoint exists"
            raise write_failure(err, f"the checkpoint of step {step}", kept) from err
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        _sync(layout.checkpoints)
        for _, old in layout.list_checkpoints()[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    acc.wait_for_everyone()


def _parse_state(path: Path) -> dict[str, Any]:
    """The ``state.json`` of checkpoint folder ``path``; ``ValueError`` saying what is wrong with it."""
    try:
        saved = json.loads((path / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"is unreadable ({err})") from err
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or saved.get("step") != checkpoint_step(path):
        raise ValueError(f"is not the {FORMAT} state of step {checkpoint_step(path)}")
    optimizer = saved.get("optimizer")
    shapes = (("parameters", list), ("param_groups", list), ("values", dict))
    if not isinstance(optimizer, dict) or not all(isinstance(optimizer.get(k), kind) for k, kind in shapes):
        raise ValueError("has no optimizer state (parameters, param_groups, values)")
    if not isinstance(saved.get("scheduler"), dict):
        raise ValueError("has no learning-rate scheduler state")
    return saved


def _state_error(path: Path, problem: str) -> CheckpointError:
    return CheckpointError(
        f"{path / STATE} {problem}. Move {path} away to resume from an earlier checkpoint, or delete "
        f"{path.parent} to start the run over."
    )


def verify_checkpoint(path: Path) -> str | None:
    """What is wrong with a checkpoint folder (missing file, size or sha256 mismatch...), or None."""
    try:
        meta = json.loads((path / META).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"it has no {META} (not finished, or written by an older opct)"
    except (OSError, ValueError) as err:
        return f"its {META} is unreadable ({err})"
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        return f"its {META} is not an {FORMAT} manifest"
    if meta.get("step") != checkpoint_step(path):
        return f"its {META} is for step {meta.get('step')}"
    files = meta.get("files")
    if not isinstance(files, dict) or any(name not in files for name in REQUIRED):
        return f"its {META} does not list {', '.join(REQUIRED)}"
    for name, entry in files.items():
        file = path / name
        if Path(name).name != name or not isinstance(entry, dict):
            return f"its {META} has a bad entry {name!r}"
        if not file.is_file():
            return f"{name} is missing"
        size = file.stat().st_size
        if size != entry.get("bytes"):
            return f"{name} has {size} bytes where {entry.get('bytes')} were written"
        if sha256_file(file) != entry.get("sha256"):
            return f"{name} does not match its sha256"
    try:
        _parse_state(path)
    except ValueError as err:
        return f"its {STATE} {err}"
    return None


def newest_valid_checkpoint(run: RunLayout | Path) -> tuple[int, Path] | None:
    """The newest checkpoint whose files match their hashes; warns naming any newer one it skips.

    None when the run has no checkpoint; :class:`CheckpointError` when it has some and none is valid.
    """
    layout = layout_of(run)
    found = layout.list_checkpoints()
    skipped: list[str] = []
    for step, path in reversed(found):
        problem = verify_checkpoint(path)
        if problem is None:
            if skipped:
                warnings.warn(
                    f"skipping damaged checkpoint(s): {'; '.join(skipped)}; resuming from the previous valid one, {path}",
                    RunDirWarning,
                    stacklevel=2,
                )
            return step, path
        skipped.append(f"{path} ({problem})")
    if found:
        raise CheckpointError(
            f"no valid checkpoint in {layout.checkpoints}: {'; '.join(skipped)}. "
            f"Delete {layout.checkpoints} to start the run over."
        )
    return None


def _named(keys: list[str]) -> str:
    return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def _load_model(path: Path, model: torch.nn.Module, sharding: ShardedState | None = None) -> None:
    params = _trainable(model)
    tensors = load_file(str(path / MODEL))
    missing, unexpected = sorted(set(params) - set(tensors)), sorted(set(tensors) - set(params))
    if missing or unexpected:
        what = "; ".join(
            part for part in (f"missing {_named(missing)}" if missing else "", f"unexpected {_named(unexpected)}" if unexpected else "") if part
        )
        raise CheckpointError(
            f"{path / MODEL} does not hold exactly the model's trainable parameters: {what}. "
            f"It was written for another model or adapter; move {path} away to resume from an older checkpoint."
        )
    for name, p in params.items():
        t = tensors[name]
        if t.shape != p.shape or t.dtype != p.dtype:
            raise CheckpointError(
                f"{path / MODEL}: {name} is {t.dtype} {tuple(t.shape)} but the model's is {p.dtype} {tuple(p.shape)}"
            )
        if sharding is None:
            with torch.no_grad():
                p.copy_(t)
    if sharding is not None:
        sharding.load_full_params(model, tensors)


def _load_optimizer(
    path: Path, saved: dict[str, Any], model: torch.nn.Module, optimizer: Any, sharding: ShardedState | None = None
) -> None:
    order = _parameter_order(model, optimizer)
    if saved["parameters"] != order:
        diff = next((f"{a} vs {b}" for a, b in zip(saved["parameters"], order, strict=False) if a != b), "their number")
        raise CheckpointError(f"{path / STATE}: the optimizer was saved for other parameters ({diff})")
    index = {name: i for i, name in enumerate(order)}
    state: dict[int, dict[str, Any]] = {}
    for key, tensor in load_file(str(path / OPTIMIZER)).items():
        name, _, field = key.rpartition("/")
        if name not in index:
            raise CheckpointError(f"{path / OPTIMIZER}: unexpected key {key}")
        state.setdefault(index[name], {})[field] = tensor
    for name, values in saved["values"].items():
        state.setdefault(index[name], {}).update(values)
    groups = saved["param_groups"]
    for group, now in zip(groups, optimizer.param_groups, strict=False):  # JSON turned tuples (betas) into lists
        for key, value in group.items():
            if isinstance(now.get(key), tuple) and isinstance(value, list):
                group[key] = tuple(value)
    try:
        if sharding is not None:
            sharding.load_full_optimizer(model, optimizer, order, state, groups)
        else:
            optimizer.load_state_dict({"state": state, "param_groups": groups})
    except (ValueError, KeyError) as err:
        raise CheckpointError(f"{path}: the optimizer state does not fit this optimizer ({err})") from err


def load_checkpoint_weights(path: Path, model: torch.nn.Module) -> int:
    """Load only the trained weights of a verified checkpoint into ``model`` (built as the run built it:
    the base, dropout off, its LoRA adapter), to measure that step; returns the step. Nothing trains on."""
    problem = verify_checkpoint(path)
    if problem is not None:
        raise CheckpointError(f"{path}: {problem}")
    _load_model(path, model)
    return int(checkpoint_step(path) or 0)


def load_checkpoint(
    path: Path, model: torch.nn.Module, optimizer: Any, scheduler: Any, scaler: Any = None,
    sharding: ShardedState | None = None,
) -> int:
    """Load a verified checkpoint into the (unwrapped) model, optimizer, scheduler and scaler; returns its step.

    ``sharding``: how to load into a sharded model (collective: every process loads).
    """
    try:
        saved = _parse_state(path)
    except ValueError as err:
        raise _state_error(path, str(err)) from err
    _load_model(path, model, sharding)
    try:
        _load_optimizer(path, saved["optimizer"], model, optimizer, sharding)
        scheduler.load_state_dict(saved["scheduler"])
    except (KeyError, TypeError, IndexError, AttributeError) as err:  # a state of the right shape, wrong content
        raise _state_error(path, f"does not fit this run's optimizer or scheduler ({type(err).__name__}: {err})") from err
    if scaler is not None:
        if saved.get("scaler") is None:
            raise CheckpointError(f"{path} was written without a gradient scaler (mixed precision changed?)")
        scaler.load_state_dict(saved["scaler"])
    return int(saved["step"])
