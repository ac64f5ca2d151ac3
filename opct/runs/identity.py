"""What a result was computed from, and whether a rerun may keep it: the one identity-of-inputs rule.

A trained run, an eval's records and results, and an attack each record the inputs they depend on:
settings, a data hash, a weights hash. A rerun keeps the result only when :func:`input_changes` finds no
difference between the recorded inputs and today's. Every caller compares the same way:

* both sides are flattened to dotted keys (``optim.lr``, ``generation_config.max_new_tokens``); an empty
  section holds no setting;
* a key one side lacks is read at its default (``defaults``, dotted), so a setting given explicitly at its
  default and one omitted (or recorded before the setting existed) are the same input;
* the keys in ``ignore`` never make another result (where it lives, the CPU threads, the model's name
  when its weights' hash is recorded).

The callers: resume (:func:`opct.runs.resume.check_resumable`), what an experiment trains again
(``retrain_reason`` in :mod:`opct.experiments.invalidation`) and the eval and attack runners
(``stale_reason``, ``identity_changes`` in :mod:`opct.evals.identity`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from opct.config import RunConfig, dump_config


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one dict with dotted keys (an empty mapping contributes no key)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def input_changes(recorded: Mapping[str, Any], current: Mapping[str, Any], *,
                  defaults: Mapping[str, Any] | None = None, ignore: Collection[str] = ()) -> list[str]:
    """The dotted keys whose value differs between the ``recorded`` inputs of a result and the ``current``
    ones, sorted; a key one side lacks is read at its ``defaults`` value (dotted keys) when it has one,
    and the keys in ``ignore`` are never a change. Both sides may be nested or already flat."""
    fill = dict(defaults or {})
    before, now = {**fill, **flatten(recorded)}, {**fill, **flatten(current)}
    return sorted(k for k in set(before) | set(now) if k not in ignore and before.get(k) != now.get(k))


def run_settings(cfg: RunConfig) -> dict[str, Any]:
    """A run's settings as the inputs its manifest records (``config``), flattened to dotted keys."""
    return flatten(dump_config(cfg))


def run_defaults(cfg: RunConfig) -> dict[str, Any]:
    """Every setting of ``cfg``'s method at its default (dotted keys); empty if that method has no default
    configuration (its section has required keys)."""
    try:
        return run_settings(type(cfg).model_validate({"method": cfg.method}))
    except ValueError:
        return {}


#: Run settings whose default changed: dotted key -> (the old default, the new one). A manifest written before
#: the change recorded the old default explicitly; a run now at the new default reads it as the same input.
#: ``train.merged_lora_sampling`` false -> auto (issue 57): on a CPU ``auto`` does not merge, so the rollouts are
#: the same bit for bit (benchmarks/results/decoder-cpu-20261202/README.md); a CUDA run recorded before it and
#: resumed now samples from the merged copy from then on (the same policy, at float rounding).
#: ``profile.pairs_per_axis`` 8 -> 0 (issue 58): the run-start profile trains nothing; a resumed run keeps the one
#: its start measured.
CHANGED_DEFAULTS: dict[str, tuple[Any, Any]] = {"train.merged_lora_sampling": (False, "auto"),
                                                "profile.pairs_per_axis": (8, 0)}


def run_setting_changes(recorded_config: Mapping[str, Any], cfg: RunConfig, ignore: Collection[str] = ()) -> list[str]:
    """The settings in which the run configuration a manifest recorded (``recorded_config``) differs from
    ``cfg``, defaults filled for keys either side lacks (:func:`input_changes`), an old default recorded
    before :data:`CHANGED_DEFAULTS` changed it read as the new one."""
    recorded, current = flatten(recorded_config), flatten(dump_config(cfg))
    for key, (old, new) in CHANGED_DEFAULTS.items():
        if recorded.get(key, new) == old and current.get(key) == new:
            recorded[key] = new
    return input_changes(recorded, current, defaults=run_defaults(cfg), ignore=ignore)
