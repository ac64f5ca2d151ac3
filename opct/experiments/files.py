"""Reading experiment files: ``extends:`` another file, ``--set`` overrides, paths relative to the file.

Experiments, studies and selections are all read here (:func:`read_extended`), so a file means the
same thing whichever command reads it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from opct.config import ConfigError, ConfigSource, apply_overrides, read_config_file


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` laid over it: dicts merge key by key, any other value replaces (copies, never aliases)."""
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def resolve_relative(tree: dict[str, Any], source: str | Path) -> dict[str, Any]:
    """A configuration file's ``selection`` paths (its own, and each of ``family_picks``'), read relative to
    the file that names them, whichever file of an ``extends`` chain that is."""
    holders = [tree, *(p for p in (tree.get("family_picks") or {}).values() if isinstance(p, dict))]
    for holder in holders:
        value = holder.get("selection")
        if isinstance(value, str) and not Path(value).is_absolute():
            holder["selection"] = str((Path(source).parent / value).resolve())
    return tree


def read_extended(
    path: str | Path, what: str, overrides: list[str] | None = None, drop: tuple[str, ...] = ()
) -> tuple[dict[str, Any], ConfigSource]:
    """A configuration file's tree: its ``extends`` chain resolved depth-first (each base file's own
    ``extends`` first, less the keys in ``drop``), then the file's own keys, then ``--set key=value``
    overrides; ``selection`` paths read relative to the file that names them. A cycle (a file that
    extends itself through any chain) is a :class:`~opct.config.ConfigError` naming the files. Returns
    the tree and its source (its name for error messages, and the file and line, or the ``--set``, each key
    came from)."""
    tree, source = read_config_file(path, what)
    tree = resolve_relative(tree, path)
    extends = tree.pop("extends", None)
    if extends is not None:
        origins: dict[str, str] = {}
        base = _resolved_base(Path(path), extends, (_identity(Path(path)),), [str(path)], origins)
        for key in drop:
            base.pop(key, None)
        tree = deep_merge(base, tree)
        source = ConfigSource(str(source), {**origins, **source.origins})
    return tree, apply_overrides(tree, source, overrides or [])


def _identity(path: Path) -> str:
    """One name per file however it is spelled (``a/../b.yaml`` and ``b.yaml`` are one file)."""
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):  # a symlink loop: the name as written
        return str(path.absolute())


def _resolved_base(child: Path, extends: Any, seen: tuple[str, ...], chain: list[str],
                   origins: dict[str, str]) -> dict[str, Any]:
    """The tree of the experiment file ``child`` extends, its own ``extends`` resolved first (depth-first);
    where each of its keys was written goes into ``origins`` (a nearer file's over a further one's)."""
    if not isinstance(extends, str) or not extends.strip():
        raise ConfigError(f"{child}: extends: must name one experiment file, got {extends!r}")
    base_path = child.parent / extends
    chain = [*chain, str(base_path)]
    if _identity(base_path) in seen:
        raise ConfigError(f"{chain[0]}: extends: is a cycle: {' -> '.join(chain)}; one of these files must not "
                          "extend the others")
    base, source = read_config_file(base_path, "experiment")
    base = resolve_relative(base, base_path)
    further = base.pop("extends", None)
    if further is None:
        origins.update(source.origins)
        return base
    merged = deep_merge(_resolved_base(base_path, further, (*seen, _identity(base_path)), chain, origins), base)
    origins.update(source.origins)
    return merged
