"""Experiment trackers (``train.trackers``, like TRL's ``report_to``): TensorBoard, W&B, Trackio.

A run's trackers write under its ``trackers/`` folder (:attr:`opct.runs.layout.RunLayout.trackers`):
TensorBoard events in ``trackers/<project>/``, W&B's files in ``trackers/wandb/`` (``WANDB_DIR``
overrides it). Every run of one project (``train.tracker_project``, default ``opct``) is one tracker
run named after the run (``name``), with ``train.tracker_entity`` and ``train.tracker_tags``; its W&B id
is kept in ``trackers/wandb-run-id`` so that a resumed run, and the evaluation and attack that an
experiment runs on it afterwards, log to the same W&B run.

Keys are namespaced: ``train/<metric>`` for a step's training statistics, ``val/<metric>`` for the
validation measurements, and, logged by :func:`log_to_run` after training, ``eval/<eval>/<metric>``
and ``attack/<metric>``, at the run's last step. ``metrics.jsonl`` is always written, trackers or not.
"""

from __future__ import annotations

import importlib.util
import json
import netrc
import os
import urllib.parse
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opct.config import RunConfig, dump_config
from opct.errors import OpctError
from opct.runs.identity import flatten
from opct.runs.layout import RunLayout

#: The tracker project when ``train.tracker_project`` is not set.
DEFAULT_PROJECT = "opct"
WANDB_ID_FILE = "wandb-run-id"


#: The package each tracker needs, and the extra of opct that installs it.
TRACKER_PACKAGES = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb"), "trackio": ("trackio", "trackio")}
#: ``WANDB_MODE`` values under which W&B needs no login.
WANDB_NO_LOGIN_MODES = ("offline", "disabled", "dryrun")


class TrackerSetupError(OpctError, RuntimeError):
    """A tracker in ``train.trackers`` cannot start: its package is missing, or W&B has no login."""


def check_trackers(cfg: RunConfig, environ: Mapping[str, str] | None = None, netrc_file: str | None = None) -> None:
    """Refuse, before anything loads or is written, trackers that would fail at the run's start: a tracker
    whose package is not installed, and ``wandb`` with no login (no ``WANDB_API_KEY``, no ``wandb login`` entry
    in ``~/.netrc``) unless ``WANDB_MODE`` is offline or disabled. The message says how to fix it."""
    environ = os.environ if environ is None else environ
    for tracker in cfg.train.trackers:
        package, extra = TRACKER_PACKAGES[tracker]
        if importlib.util.find_spec(package) is None:
            raise TrackerSetupError(f"train.trackers: {tracker} needs the {package} package, which is not installed: "
                                    f"pip install 'opct[{extra}]', or remove {tracker} from train.trackers")
    if "wandb" in cfg.train.trackers and not _wandb_logged_in(environ, netrc_file):
        raise TrackerSetupError(
            "train.trackers: wandb has no login (no WANDB_API_KEY, no `wandb login` entry in ~/.netrc), so the run "
            "could not start its W&B run: run `wandb login` or set WANDB_API_KEY, or set WANDB_MODE=offline to log "
            "to the run's trackers/ folder only (wandb sync uploads it later); nothing was written")


def _wandb_logged_in(environ: Mapping[str, str], netrc_file: str | None) -> bool:
    """Whether W&B can start without asking: offline or disabled, an API key in the environment, or a
    ``wandb login`` entry in the netrc file for its host."""
    if environ.get("WANDB_MODE", "").lower() in WANDB_NO_LOGIN_MODES or environ.get("WANDB_API_KEY"):
        return True
    host = urllib.parse.urlsplit(environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    try:
        return netrc.netrc(netrc_file or environ.get("NETRC")).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def tracker_hparams(cfg: RunConfig) -> dict[str, int | float | str | bool]:
    """The configuration flattened to the scalar types every tracker accepts (TensorBoard's hparams
    take no None, list or dict): None becomes "none", lists and dicts their JSON text."""
    out: dict[str, int | float | str | bool] = {}
    for key, value in flatten(dump_config(cfg)).items():
        if value is None:
            out[key] = "none"
        elif isinstance(value, bool | int | float | str):
            out[key] = value
        else:
            out[key] = json.dumps(value)
    return out


def project_name(cfg: RunConfig) -> str:
    """The tracker project of ``cfg``'s run."""
    return cfg.train.tracker_project or DEFAULT_PROJECT


def wandb_run_id(layout: RunLayout) -> str:
    """The W&B id of the run in ``layout``: read from ``trackers/wandb-run-id``, made and kept there the first time."""
    path = layout.trackers / WANDB_ID_FILE
    if path.is_file():
        return path.read_text(encoding="utf-8").strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:12]
    path.write_text(run_id + "\n", encoding="utf-8")
    return run_id


def init_kwargs(cfg: RunConfig, layout: RunLayout) -> dict[str, dict[str, Any]]:
    """accelerate's ``init_trackers(init_kwargs=...)``: W&B's run name, entity, tags, id and folder."""
    kwargs: dict[str, dict[str, Any]] = {}
    if "wandb" in cfg.train.trackers:
        wandb_dir = Path(os.environ.get("WANDB_DIR") or layout.trackers)
        wandb_dir.mkdir(parents=True, exist_ok=True)
        kwargs["wandb"] = {"name": cfg.name, "entity": cfg.train.tracker_entity, "tags": list(cfg.train.tracker_tags),
                           "id": wandb_run_id(layout), "resume": "allow", "dir": str(wandb_dir)}
    return kwargs


def step_metrics(record: Mapping[str, Any], validation_keys: set[str]) -> dict[str, float]:
    """A step's numbers as tracker keys: ``val/<key>`` for a validation measurement, ``train/<key>`` for
    the rest; ``step`` is the tracker's own axis, not a scalar."""
    return {f"{'val' if key in validation_keys else 'train'}/{key}": value for key, value in record.items()
            if key != "step" and isinstance(value, int | float) and not isinstance(value, bool)}


def result_metrics(namespace: str, results: Mapping[str, Any]) -> dict[str, float]:
    """``eval/<eval>/<metric>`` (``namespace`` ``eval``, ``results``: eval name -> its results.json) or
    ``attack/<metric>`` (``namespace`` ``attack``, ``results``: ``{"": results.json}``) for every metric
    with a value."""
    out = {}
    for name, result in results.items():
        for metric, est in (result.get("metrics") or {}).items():
            value = est.get("value") if isinstance(est, Mapping) else est
            if isinstance(value, int | float) and value == value:
                out["/".join(part for part in (namespace, name, metric) if part)] = float(value)
    return out


def log_to_run(run_dir: Path, metrics: Mapping[str, float]) -> bool:
    """Log ``metrics`` (e.g. :func:`result_metrics`) into the trackers of the finished run in ``run_dir``,
    at its last step, in the same project and (W&B) the same run; False when the run has no tracker."""
    layout = RunLayout(run_dir)
    try:
        manifest = json.loads(layout.manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    raw = manifest.get("config") or {}
    if not (raw.get("train") or {}).get("trackers") or not metrics:
        return False  # the common case: nothing to open
    cfg = RunConfig.model_validate(raw)
    step = int(manifest.get("total_steps") or 0)
    if "tensorboard" in cfg.train.trackers:
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(log_dir=str(layout.trackers / project_name(cfg))) as writer:
            for key, value in metrics.items():
                writer.add_scalar(key, value, step)
    if "wandb" in cfg.train.trackers:
        import wandb

        run = wandb.init(project=project_name(cfg), **init_kwargs(cfg, layout)["wandb"])
        run.log(dict(metrics), step=step)
        run.finish()
    if "trackio" in cfg.train.trackers:
        import trackio

        trackio.init(project=project_name(cfg), name=cfg.name, resume="allow")
        trackio.log(dict(metrics), step=step)
        trackio.finish()
    return True
