"""Switching a run's method on the command line (``--method NAME``, ``--set method=NAME``): what of the file's
section for its old method applies to the new one and is kept, and what is dropped, each key named.

A method that generates has one generation section, the field whose type is a
:class:`~opct.config.generation.SamplingConfig` (OPCT's ``sampling``: the student's rollouts; BCT's ``targets``:
the frozen model's answers). Its length, memory and engine keys (:data:`CARRIED`) mean the same for every
such method, so the ones the file sets are kept, moved to the new method's generation section (unless the
command line sets them there). Everything else in the old section is the old method's own recipe (the
distribution it samples, OPCT's at temperature 1 and BCT's greedy; its loss) and is dropped; one
:class:`MethodSwitchWarning` names each key kept and each key dropped, with the value the new method takes
instead where it has that key. Before issue 73 the whole section was dropped: ``--method bct`` on a file with
``opct.sampling.max_new_tokens: 16`` trained BCT's targets to 1,024 tokens.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection
from typing import Any

from pydantic import BaseModel

from opct.config.generation import SamplingConfig
from opct.config.method_registry import METHODS

#: The generation keys that mean the same under every method: how long, in what memory, on which engine.
CARRIED = ("max_new_tokens", "min_new_tokens", "sequences_per_call", "engine", "decoder",
           "vllm_gpu_memory_utilization", "vllm_engine_args")


class MethodSwitchWarning(UserWarning):
    """A run's method changed on the command line: what of the file's section for its old method was kept, and
    each key that was dropped."""


def generation_field(config_class: type[BaseModel]) -> str | None:
    """The settings field of a method's section that holds its generation settings, or None (ACT generates nothing)."""
    for name, field in config_class.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, SamplingConfig):
            return name
    return None


def _leaves(value: Any, prefix: str) -> list[str]:
    """``key=value`` of every leaf of a settings subtree, its keys dotted below ``prefix``."""
    if isinstance(value, dict) and value:
        return [leaf for key, sub in value.items() for leaf in _leaves(sub, f"{prefix}.{key}")]
    return [f"{prefix}={value}"]


def _moved(section: dict[str, Any], old: str, new: str, tree: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Move the keys of ``section`` (``old``'s) that apply to ``new`` into ``tree[new]``; ``(kept, dropped)``, each
    a list of phrases naming the keys."""
    old_class, new_class = METHODS.get(old).config_class, METHODS.get(new).config_class
    old_gen, new_gen = generation_field(old_class), generation_field(new_class)
    new_gen_class = new_class.model_fields[new_gen].annotation if new_gen else None
    defaults = new_class.model_fields[new_gen].get_default(call_default_factory=True) if new_gen else None
    kept: list[str] = []
    dropped: list[str] = []
    for key, value in section.items():
        if key != old_gen or not isinstance(value, dict) or new_gen is None:
            dropped += _leaves(value, f"{old}.{key}")
            continue
        target = tree.setdefault(new, {})
        target = target.setdefault(new_gen, {}) if isinstance(target, dict) else None
        for sub, sub_value in value.items():
            where = f"{new}.{new_gen}.{sub}"
            if sub in CARRIED and sub in new_gen_class.model_fields and isinstance(target, dict) and sub not in target:
                target[sub] = sub_value
                kept.append(f"{old}.{key}.{sub}={sub_value} as {where}")
            elif isinstance(target, dict) and sub in target:
                dropped += [f"{leaf} ({where}={target[sub]} is set)" for leaf in _leaves(sub_value, f"{old}.{key}.{sub}")]
            elif sub in new_gen_class.model_fields:
                took = getattr(defaults, sub)
                dropped += [f"{leaf} ({where} stays {took})" for leaf in _leaves(sub_value, f"{old}.{key}.{sub}")]
            else:
                dropped += _leaves(sub_value, f"{old}.{key}.{sub}")
        if isinstance(tree.get(new), dict) and tree[new].get(new_gen) == {}:
            del tree[new][new_gen]
            if not tree[new]:
                del tree[new]
    return kept, dropped


def switch_method(tree: dict[str, Any], file_method: str, overridden: Collection[str], methods: Collection[str]) -> None:
    """Resolve a method switch in ``tree`` (a run's settings after ``--set``): when ``--set method=...`` /
    ``--method`` chose another registered method than ``file_method`` (the one the file names, the default
    method when it names none), the file's ``file_method`` section goes; of its keys, those that apply to the
    new method are kept (the module's rule) and one :class:`MethodSwitchWarning` names each key kept and each
    dropped. A section the overrides themselves wrote (``overridden``: their dotted keys) is left in place, so
    that it is refused as a section of another method."""
    method = tree.get("method", METHODS.default)
    section = tree.get(file_method)
    if method == file_method or method not in methods or file_method not in methods or section is None:
        return
    if any(key == file_method or key.startswith(f"{file_method}.") for key in overridden):
        return
    del tree[file_method]
    if isinstance(section, dict):
        kept, dropped = _moved(section, file_method, method, tree)
    else:
        kept, dropped = [], [file_method]
    said = [f"kept {', '.join(kept)}"] if kept else []
    said += [f"dropped {', '.join(dropped)}"] if dropped else []
    warnings.warn(f"method switched from {file_method} to {method}: {'; '.join(said) or f'the {file_method} section was empty'}",
                  MethodSwitchWarning, stacklevel=3)
