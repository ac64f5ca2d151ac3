"""Reading experiment files: ``extends:`` another file, ``--set`` overrides, paths relative to the file.

Experiments, studies and selections are all read here (:func:`read_extended`), so a file means the
same thing whichever command reads it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from opct.config import ConfigError, ConfigSource, apply_overrides, read_config_file


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` laid over it: dicts merge key by key, any other value replaces (copies, never aliases)."""
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def read_referenced(path: str | Path, source: str | Path, field: str) -> dict[str, Any]:
    """The JSON object in the file ``path`` that the configuration file ``source`` names in ``field``
    (``family_picks.qwen3.selection``); a :class:`~opct.config.ConfigError` naming the configuration file, the
    field and the referenced file when it is missing, unreadable, not JSON (a truncated file) or not an object."""
    where = f"{source}: {field}: {path}"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist; give the path of a selection.json (opct-lab select writes one), "
                          "relative to the file that names it") from None
    except OSError as err:
        raise ConfigError(f"{where} cannot be read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{where} is not UTF-8 text ({err.reason}); give a selection.json") from None
    except ValueError as err:
        raise ConfigError(f"{where} is not valid JSON ({err}): the file is cut or damaged; write it again "
                          "(opct-lab select writes it) or restore it") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where} holds a JSON {type(data).__name__}, not the object a selection.json is")
    return data


def resolve_relative(tree: dict[str, Any], source: str | Path) -> dict[str, Any]:
    """A configuration file's ``selection`` paths (its own, and each of ``family_picks``'), read relative to
    the file that names them, whichever file of an ``extends`` chain that is, then read and checked
    (:func:`read_referenced`), so that a bad one fails when the file is read, ``--dry-run`` included. A
    relative path must stay inside that file's folder (``../../etc/passwd`` is refused, naming the field); a
    file elsewhere is named by an absolute path, on purpose."""
    holders = [("selection", tree)]
    holders += [(f"family_picks.{k}.selection", p) for k, p in (tree.get("family_picks") or {}).items() if isinstance(p, dict)]
    folder = Path(source).parent.resolve()
    for field, holder in holders:
        value = holder.get("selection")
        if not isinstance(value, str):
            continue
        if not Path(value).is_absolute():
            resolved = (Path(source).parent / value).resolve()
            if folder not in resolved.parents:
                raise ConfigError(f"{source}: {field}: {value} leads outside the file's folder {folder}; a relative "
                                  "path stays inside it. Name a file elsewhere by its absolute path, on purpose")
            holder["selection"] = value = str(resolved)
        read_referenced(value, source, field)
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
