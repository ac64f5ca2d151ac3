"""Reading pairs from a JSONL or JSON file or a Hugging Face dataset, and writing them as JSONL."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from opct.errors import require_extra
from opct.pairs.contract import DERIVED_ID_PREFIX, ConsistencyPair
from opct.pairs.trl_sdft import PRIVILEGED_CONTEXT, TeacherPromptBuiltWarning
from opct.pairs.validation import DerivedPairIdWarning, PairFileError, PairProblem, pair_from_record


def _records_from_jsonl(path: Path, problems: list[PairProblem]) -> Iterator[tuple[int, Any]]:
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                problems.append(PairProblem(str(path), lineno, "", f"not UTF-8 text (byte {raw[err.start]:#04x} at column "
                                                                   f"{err.start + 1}); save the file as UTF-8"))
                continue
            if not text.strip():
                continue
            try:
                yield lineno, json.loads(text)
            except json.JSONDecodeError as err:
                problems.append(PairProblem(str(path), lineno, "", f"malformed JSON ({err.msg} at column {err.colno})"))


def _records_from_hf(path: Path | str, split: str | None) -> Iterator[tuple[int, Any]]:
    datasets = require_extra("datasets", "data", f"reading pairs from the Hugging Face dataset {path}")

    if Path(path).exists():
        ds = datasets.load_from_disk(str(path))
    else:
        ds = datasets.load_dataset(str(path), split=split or "train")
    if isinstance(ds, datasets.DatasetDict):
        if split is None:
            if len(ds) != 1:
                raise ValueError(f"{path} holds splits {list(ds)}; choose one with split=...")
            split = next(iter(ds))
        ds = ds[split]
    yield from enumerate(ds, start=1)


def _is_hf_folder(path: Path) -> bool:
    return path.is_dir() and any((path / name).exists() for name in ("dataset_info.json", "state.json", "dataset_dict.json"))


def read_pairs(
    source: str | Path,
    columns: Mapping[str, str] | None = None,
    split: str | None = None,
) -> list[ConsistencyPair]:
    """Read and validate consistency pairs from a JSONL file or a Hugging Face dataset.

    ``source`` is a ``.jsonl`` / ``.json`` file, a ``save_to_disk`` folder, or a hub id (resolved only
    when given). ``columns`` maps contract names (``id``, ``prompt``, ``teacher_prompt``, ``axis``,
    ``meta``) to the source's field names. Raises :class:`PairFileError` listing every problem
    (file, line, field) if any record is invalid, including duplicate ids.
    """
    path = Path(source)
    problems: list[PairProblem] = []
    if path.suffix in {".jsonl", ".json"} or path.is_file():
        if not path.exists():
            raise FileNotFoundError(f"pair file not found: {path}")
        if path.suffix == ".json":
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except UnicodeDecodeError as err:
                raise PairFileError([PairProblem(str(path), 0, "", f"not UTF-8 text ({err.reason}); save it as UTF-8")]) from None
            except json.JSONDecodeError as err:
                raise PairFileError([PairProblem(str(path), err.lineno, "", f"malformed JSON ({err.msg} at column {err.colno})")]
                                    ) from None
            if not isinstance(data, list):
                raise PairFileError([PairProblem(str(path), 0, "", "a .json pair file must hold a list of pairs")])
            records: Iterable[tuple[int, Any]] = enumerate(data, start=1)
        else:
            records = _records_from_jsonl(path, problems)
    elif _is_hf_folder(path) or not path.exists():
        # deferred: loads torch and transformers only when called
        from opct.models import looks_like_local_path

        if not path.exists() and looks_like_local_path(str(source)):
            raise FileNotFoundError(f"pair data not found: {path} (a local path; it is not looked up on the hub)")
        records = _records_from_hf(source, split)
    else:
        raise FileNotFoundError(f"{path} is neither a JSONL file nor a Hugging Face dataset folder")

    pairs: list[ConsistencyPair] = []
    first_line: dict[str, int] = {}
    id_field = (columns or {}).get("id", "id")
    teacher_field = (columns or {}).get("teacher_prompt", "teacher_prompt")
    context_field = (columns or {}).get(PRIVILEGED_CONTEXT, PRIVILEGED_CONTEXT)
    derived = built = 0
    for lineno, record in records:
        pair = pair_from_record(record, (str(path), lineno), problems, columns)
        if pair is None:
            continue
        own_id = isinstance(record, Mapping) and record.get(id_field) is not None
        derived += not own_id
        built += isinstance(record, Mapping) and record.get(teacher_field) is None
        if pair.id in first_line:
            what = "duplicate id" if own_id else "the same prompts as the pair"
            problems.append(
                PairProblem(str(path), lineno, id_field, f"{what} {pair.id!r} (first seen on line {first_line[pair.id]})")
            )
            continue
        first_line[pair.id] = lineno
        pairs.append(pair)
    if problems:
        raise PairFileError(problems)
    if not pairs:
        raise PairFileError([PairProblem(str(path), 0, "", "contains no pairs")])
    if built:
        warnings.warn(f"{path}: built teacher_prompt for {built} of {len(pairs)} pairs from prompt + {context_field}, "
                      "as TRL's SDFTTrainer does: the last user turn, a blank line, the privileged context",
                      TeacherPromptBuiltWarning, stacklevel=2)
    if derived:
        warnings.warn(f"{path}: {derived} of {len(pairs)} pairs have no {id_field!r}; each got "
                      f"{DERIVED_ID_PREFIX}<sha256 of its prompt and teacher_prompt, 16 hex digits>",
                      DerivedPairIdWarning, stacklevel=2)
    return pairs


def write_pairs(pairs: Iterable[ConsistencyPair | Mapping[str, Any]], path: str | Path) -> Path:
    """Write pairs as JSONL (one object per line), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for pair in pairs:
            record = pair.to_dict() if isinstance(pair, ConsistencyPair) else dict(pair)
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path

