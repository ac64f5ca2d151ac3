"""The benchmark copies opct is measured on, pinned: where each comes from, at which commit, and the
hashes that say a local copy is that data.

All four are ``datasets.save_to_disk`` folders from the OPCT paper authors' public repository
(:data:`AUTHORS_REPO` at :data:`AUTHORS_COMMIT`, folder ``datasets/<name>/``); ``../shared/data``
holds byte-identical copies (same git blob ids). Three were prepared by the authors from an upstream
hub data set (prompt wrapper added, GPQA options shuffled) at a revision they did not record; IFEval
is ``google/IFEval`` as downloaded, at the revision its ``dataset_info.json`` records.

Two hashes per data set:

* ``files``: sha256 of each file of the folder, as fetched (an exact copy matches them);
* ``content_sha256``: sha256 of the canonical JSONL export (:func:`canonical_sha256`): one line per
  row, in order, ``json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"))`` with
  ``None`` values dropped from every mapping (Arrow fills absent struct fields with ``None``). It is the
  same whichever way the rows are stored (a re-saved folder, a Parquet or JSONL export), so it is what
  ``opct data verify`` decides on.

The hashes were computed from ``../shared/data`` (``opct data verify ../shared/data`` re-checks them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opct.datasets.errors import DatasetFormatError

__all__ = ["AUTHORS_COMMIT", "AUTHORS_REPO", "PINNED", "PinnedDataset", "PinnedFile", "canonical_sha256", "pinned"]

#: The OPCT authors' repository (GitHub) and the commit whose ``datasets/`` the copies are.
AUTHORS_REPO = "kristinafuji/on-policy-consistency-training"
AUTHORS_COMMIT = "f18511d9d780e074522d2eb5033e68f931d0ec96"


@dataclass(frozen=True)
class PinnedFile:
    """One file of a pinned folder: its name, sha256 and size in bytes."""

    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class PinnedDataset:
    """One pinned benchmark copy.

    ``name`` is its folder under a data directory (``eval.data_dir``); ``eval_key`` the ``eval.real``
    key that reads it; ``upstream`` the hub data set it comes from (``upstream_revision`` None: not
    recorded); ``hub_copy`` whether that hub revision, saved as it is, is this data (then
    ``opct data fetch --from hub`` can get it).
    """

    name: str
    title: str
    eval_key: str
    used_by: str
    rows: int
    columns: tuple[str, ...]
    content_sha256: str
    files: tuple[PinnedFile, ...]
    upstream: str
    upstream_config: str | None
    upstream_split: str
    upstream_revision: str | None
    hub_copy: bool
    licence: str
    origin: str
    note: str = ""
    repo: str = AUTHORS_REPO
    commit: str = AUTHORS_COMMIT

    @property
    def folder(self) -> str:
        """The folder inside :attr:`repo` at :attr:`commit`."""
        return f"datasets/{self.name}"

    @property
    def size(self) -> int:
        """Bytes on disk of the fetched folder."""
        return sum(f.size for f in self.files)

    @property
    def upstream_id(self) -> str:
        """The upstream as a data setting: ``owner/name[:config][@revision]``."""
        config = f":{self.upstream_config}" if self.upstream_config else ""
        revision = f"@{self.upstream_revision}" if self.upstream_revision else ""
        return f"{self.upstream}{config}{revision}"


def _files(arrow: tuple[str, int], info: tuple[str, int], state: tuple[str, int]) -> tuple[PinnedFile, ...]:
    names = ("data-00000-of-00001.arrow", "dataset_info.json", "state.json")
    return tuple(PinnedFile(n, h, s) for n, (h, s) in zip(names, (arrow, info, state), strict=True))


PINNED: dict[str, PinnedDataset] = {d.name: d for d in (
    PinnedDataset(
        name="math-500", title="MATH-500", eval_key="math500", used_by="capability (math500): MATH-500 accuracy",
        rows=500, columns=("prompt", "correct_answer", "problem", "solution", "subject", "level", "unique_id"),
        content_sha256="3641521ba76b8fc9b8d8ac058f377be5413bb0e3f5be9e6732ad0ce0a91f2f53",
        files=_files(("7ba5461554cb929666809d991d4ce54beceff860829da3486731e9ca870050b1", 645176),
                     ("80362acea37c761ae477b43d6b577b31ea05f3d555efdb4ceb0e3412c3271d80", 606),
                     ("eec7285dfaf85a6807326699b747c78c4ee7d33a77fe68ca80b72d2f325079c3", 247)),
        upstream="HuggingFaceH4/MATH-500", upstream_config=None, upstream_split="test", upstream_revision=None,
        hub_copy=False, licence="MIT (MATH, Hendrycks et al. 2021)",
        origin="Lightman et al. 2023's 500-problem subset of MATH (Hendrycks et al. 2021)",
        note="prepared by the OPCT authors (prepare_math500_dataset.py: the 'Answer: $ANSWER' prompt added, "
             "answer renamed correct_answer) from the hub's test split at an unrecorded revision"),
    PinnedDataset(
        name="gpqa-diamond", title="GPQA-Diamond", eval_key="gpqa", used_by="capability (gpqa): GPQA-D accuracy",
        rows=198, columns=("prompt", "correct_answer", "question", "subdomain"),
        content_sha256="447dc101cfcd459c2f71b462c375e1f5fbf098e3b1ee47ea244cbaf297cf8c72",
        files=_files(("80d1d152ea363866150d05055907016312428462186a81437fe588160f1678e1", 259688),
                     ("2af757431f098d0ddf65491c68cf2e13c77b1549b6ab70796de3cae6b944ef1e", 393),
                     ("bada7d74155b46779e8c27c402b0582493f4bd4db03a0981f61fd16c290dd112", 247)),
        upstream="Idavidrein/gpqa", upstream_config="gpqa_diamond", upstream_split="train", upstream_revision=None,
        hub_copy=False, licence="CC BY 4.0 (its authors ask that the questions not be published in plain text)",
        origin="GPQA (Rein et al. 2023), Diamond subset; the hub data set is gated",
        note="prepared by the OPCT authors (prepare_gpqa_dataset.py: options shuffled with random.Random(42), "
             "the 'Answer: $LETTER' prompt) at an unrecorded revision"),
    PinnedDataset(
        name="ifeval", title="IFEval", eval_key="ifeval", used_by="capability (ifeval): strict prompt-level accuracy",
        rows=541, columns=("key", "prompt", "instruction_id_list", "kwargs"),
        content_sha256="4d49ac039cbebdfc4beb3f9f30435c4fa25320caffaae441c6b9d868126744eb",
        files=_files(("e97942d61addb329bc02aabf0e8b55c89d2ce9835ff148b3f96ece6f9fc2de82", 287656),
                     ("a1ab6a05922508f4bd589bb696a7aa51ac541e3cf37f17c63e00f0aa954036f1", 3394),
                     ("4ea146acc91a1e1e7490f334f66db7e40b1be6fe5231eb8a2cd4b13444a98576", 250)),
        upstream="google/IFEval", upstream_config=None, upstream_split="train",
        upstream_revision="966cd89545d6b6acfd7638bc708b98261ca58e84", hub_copy=True, licence="Apache-2.0",
        origin="IFEval (Zhou et al. 2023)",
        note="the hub data set as downloaded (revision from its dataset_info.json)"),
    PinnedDataset(
        name="sageeval-test", title="SAGE-Eval (test facts)", eval_key="sage",
        used_by="awareness (sage): safety-awareness AUSC; its pairs (opct pairs build awareness)",
        rows=5681, columns=("safety_fact", "prompt", "augmentation_category", "safety_category", "prompt_type", "version"),
        content_sha256="7c64da148b3df8913c8d86a473cf66b0f6a40153c3603810b2b85f6bc891a3a3",
        files=_files(("fcd68d090aacba631146a9aa76249917f3f12c9b4b3adeb70440341a0aaeebec", 3401552),
                     ("fd6242bfba184b01b59270886224094efb809dce44c18f0a5a8f669dfc00cd08", 557),
                     ("116a629a5a8f2422a45a6ccbcc722ed63f231429ba35d8d76f2f218634a4e8dd", 247)),
        upstream="YuehHanChen/SAGE-Eval", upstream_config=None, upstream_split="(the authors' test facts)",
        upstream_revision=None, hub_copy=False,
        licence="not stated in the sources seen (check the YuehHanChen/SAGE-Eval card before redistributing)",
        origin="SAGE-Eval (Chen, Davidson, Lake 2025)",
        note="the OPCT paper's test split (50 safety facts held out from training), made by the authors from the "
             "hub data set at an unrecorded revision; how the facts were split is not recorded"),
)}


def pinned(name: str) -> PinnedDataset:
    """The pinned data set called ``name``; an unknown name is an error listing the known ones."""
    if name not in PINNED:
        raise DatasetFormatError(name, "no pinned data set of that name", hint=f"choose from {', '.join(PINNED)}")
    return PINNED[name]


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def canonical_sha256(rows: Iterable[Mapping[str, Any]]) -> tuple[str, int]:
    """``(sha256 of the canonical JSONL export of rows, number of rows)``; see the module docstring."""
    digest = hashlib.sha256()
    n = 0
    for row in rows:
        line = json.dumps(_canonical(row), sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
        digest.update(line.encode("utf-8"))
        n += 1
    return digest.hexdigest(), n
