"""Issue 73, round 5: messages that name nothing, or the wrong thing, and warnings printed once per DDP rank.

Each class has one helper (in ``opct/errors.py`` unless said): a file that is not UTF-8 or not valid JSON is a
:class:`~opct.errors.FileContentError` naming it (:func:`read_text`, :func:`read_json`, and for a decoding error
no reader caught, the file the failing frame had open); a library's failure to load a local folder with a
damaged JSON file names that file (:func:`load_folder`); an OSError through a symbolic link that leads nowhere
names the link and its missing target (:func:`dangling_link`), and an OSError with no file names none (never
"a file"); the shipped tokenizers are checked when unpacked and when used (``opct/testing/vendored.py``);
a remedy names the command that exists (``opct-lab select``); and in a run of several processes a warning
prints on rank 0 only, unless its category is about one rank (``opct/quiet.py``).
"""

from __future__ import annotations

import errno
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import REPO
from typer.testing import CliRunner

from opct.cli.main import app
from opct.errors import FileContentError, describe, load_folder, read_json, read_text

TOKENIZER = REPO.parent / "shared" / "models" / "qwen3-tokenizer"
needs_tokenizer = pytest.mark.skipif(not TOKENIZER.exists(), reason="needs ../shared/models/qwen3-tokenizer")


def _latin1_config(tmp_path: Path) -> Path:
    path = tmp_path / "run.yaml"
    path.write_bytes("name: x\nmodel:\n  name_or_path: caf\u00e9\n".encode("latin-1"))
    return path


# --- a file that is not UTF-8, or not valid JSON ------------------------------------------------------------------

def test_a_non_utf8_config_names_the_file_the_byte_and_the_line(tmp_path: Path) -> None:
    """The battery's probe: a Latin-1 config was reported as 'a file is not UTF-8 text'."""
    path = _latin1_config(tmp_path)
    res = CliRunner().invoke(app, ["train", "--config", str(path), "--dry-run"])
    assert res.exit_code == 2, res.output
    assert f"{path}: not UTF-8 text" in res.output and "at byte 34, line 3" in res.output
    assert "save it as UTF-8" in res.output and "a file" not in res.output


def test_read_text_reads_newlines_as_path_read_text_does(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes("a\r\nb\rc\n\u00e9".encode())
    assert read_text(path) == path.read_text(encoding="utf-8") == "a\nb\nc\n\u00e9"


def test_an_uncaught_decoding_error_names_the_file_its_reader_had_open(tmp_path: Path) -> None:
    """The fallback for a reader that does not go through read_text: the file open in the failing frame."""
    path = tmp_path / "notes.txt"
    path.write_bytes(b"ok\n\xff\n")
    try:
        path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        code, message = describe(err)
    assert code == 2 and message.startswith(f"{path}: not UTF-8 text") and "at byte 3" in message
    with pytest.raises(UnicodeDecodeError) as bare:
        b"\xff".decode("utf-8")  # no file anywhere: said so, never a wrong one
    assert describe(bare.value)[1].startswith("a file opct read is not UTF-8 text")


def test_a_chat_template_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    from opct.models.chat import read_template

    path = tmp_path / "template.jinja"
    path.write_bytes(b"{{ messages }} \xe9")
    with pytest.raises(FileContentError, match=rf"{path}: not UTF-8 text .*at byte 15, line 1"):
        read_template(str(path))


def test_a_cut_json_file_is_named_as_damaged_with_the_remedy(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text('{"kind": "tr', encoding="utf-8")
    with pytest.raises(FileContentError) as err:
        read_json(path, "delete the run to train it again")
    assert str(err.value) == (f"{path}: not valid JSON (Unterminated string starting at: line 1, column 10): the file "
                              "is cut or damaged; delete the run to train it again")
    path.write_text('{"kind": "train"}', encoding="utf-8")
    assert read_json(path, "x") == {"kind": "train"}


def test_a_damaged_model_config_in_a_dry_run_is_named(tmp_path: Path) -> None:
    from opct.training.model_shapes import read_shape

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": ', encoding="utf-8")
    with pytest.raises(FileContentError, match=rf"{folder / 'config.json'}: not valid JSON .*restore the model folder"):
        read_shape(str(folder))


def test_load_folder_names_the_damaged_json_file_and_reraises_anything_else(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0"}', encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text("{bad", encoding="utf-8")

    def load() -> None:
        json.loads("{bad")

    with pytest.raises(FileContentError, match=r"the tokenizer in .* cannot be loaded: .*tokenizer_config.json is not "
                                               r"valid JSON \(Expecting property name .*line 1, column 2\), a cut or "
                                               r"damaged file; copy it again"):
        load_folder(tmp_path, "the tokenizer", "copy it again", load)
    (tmp_path / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(json.JSONDecodeError):  # nothing damaged: the library's own error, unchanged
        load_folder(tmp_path, "the tokenizer", "copy it again", load)
    assert load_folder(tmp_path, "the tokenizer", "copy it again", lambda: 7) == 7


@needs_tokenizer
def test_a_damaged_tokenizer_folder_is_named_not_a_bare_json_error(tmp_path: Path) -> None:
    folder = tmp_path / "tok"
    shutil.copytree(TOKENIZER, folder)
    (folder / "tokenizer.json").write_text((TOKENIZER / "tokenizer.json").read_text(encoding="utf-8")[:50],
                                           encoding="utf-8")
    res = CliRunner().invoke(app, ["model", "tiny", str(tmp_path / "tiny"), "--tokenizer", str(folder)])
    assert res.exit_code == 2, res.output
    assert f"{folder / 'tokenizer.json'} is not valid JSON" in res.output and "cut or damaged" in res.output

    from opct.models.loading import load_tokenizer

    with pytest.raises(FileContentError, match=r"tokenizer.json is not valid JSON .*restore the file"):
        load_tokenizer(str(folder))


# --- the shipped xz tokenizers and their unpacked cache -----------------------------------------------------------

@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped gpt2 tokenizer files to damage, and an empty opct cache."""
    from opct.testing import vendored

    copy = tmp_path / "shipped" / "gpt2"
    shutil.copytree(vendored.shipped_folder("gpt2"), copy)
    monkeypatch.setattr(vendored, "shipped_folder", lambda family: copy)
    monkeypatch.setenv("OPCT_CACHE", str(tmp_path / "cache"))
    return copy


def test_a_corrupt_shipped_xz_tokenizer_is_named_with_what_to_do(shipped: Path) -> None:
    """The battery's probe gave 'internal error: LZMAError'."""
    from opct.testing.vendored import ShippedTokenizerError, vendored_tokenizer

    packed = shipped / "tokenizer.json.xz"
    data = bytearray(packed.read_bytes())
    data[len(data) // 2] ^= 0xFF
    packed.write_bytes(bytes(data))
    with pytest.raises(ShippedTokenizerError) as err:
        vendored_tokenizer("gpt2")
    code, message = describe(err.value)
    assert code == 1 and message.startswith(f"{packed}: the gpt2 tokenizer shipped with opct is damaged (not a valid xz")
    assert "reinstall opct" in message and "internal error" not in message
    packed.write_bytes(lzma.compress(b"{}"))  # a whole xz file of the wrong tokenizer
    with pytest.raises(ShippedTokenizerError, match=r"does not unpack to the tokenizer it should: its sha256 differs"):
        vendored_tokenizer("gpt2")


@pytest.mark.parametrize("damage", ["cut tokenizer.json", "garbled tokenizer_config.json", "file removed"])
def test_a_damaged_tokenizer_cache_is_unpacked_afresh_with_a_notice(shipped: Path, damage: str) -> None:
    """The battery's probe: a damaged unpacked tokenizer gave a bare JSON error; now it is rebuilt, saying so."""
    from opct.testing.vendored import TokenizerCacheRebuilt, vendored_tokenizer

    folder = vendored_tokenizer("gpt2")
    whole = {p.name: p.read_bytes() for p in folder.iterdir()}
    if damage == "cut tokenizer.json":
        (folder / "tokenizer.json").write_bytes(whole["tokenizer.json"][:100])
    elif damage == "garbled tokenizer_config.json":
        (folder / "tokenizer_config.json").write_text("{bad", encoding="utf-8")
    else:
        (folder / "tokenizer_config.json").unlink()
    with pytest.warns(TokenizerCacheRebuilt, match=rf"the unpacked gpt2 tokenizer in opct's cache, {folder}, was damaged "
                                                  r"\(its tokenizer(_config)?.json .*\); unpacked it afresh"):
        again = vendored_tokenizer("gpt2")
    assert again == folder and {p.name: p.read_bytes() for p in folder.iterdir()} == whole
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # nothing left aside
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # whole now: no notice
        assert vendored_tokenizer("gpt2") == folder


# --- symbolic links that lead nowhere, and OSErrors without a file ------------------------------------------------

def test_an_output_folder_through_a_dangling_link_names_the_link_and_its_target(tmp_path: Path) -> None:
    """The battery's probe: ``runs`` a symlink to a deleted folder gave 'File exists'."""
    (tmp_path / "runs").symlink_to(tmp_path / "deleted")
    with pytest.raises(FileExistsError) as err:
        (tmp_path / "runs" / "X").mkdir(parents=True, exist_ok=True)
    code, message = describe(err.value)
    assert code == 2 and message == (f"{tmp_path / 'runs'} is a symbolic link to {tmp_path / 'deleted'}, which does "
                                     f"not exist; create {tmp_path / 'deleted'}, or remove the link (rm "
                                     f"{tmp_path / 'runs'}) or give another path")
    with pytest.raises(FileNotFoundError) as missing:  # writing a file under it: the same words
        (tmp_path / "runs" / "a.json").write_text("{}")
    assert describe(missing.value)[1] == message


def test_eval_out_a_dangling_link_names_it(tmp_path: Path, tiny_model: Path) -> None:
    """The same probe through a command: ``opct eval --out`` a link to a deleted folder said 'File exists'."""
    link = tmp_path / "evout"
    link.symlink_to(tmp_path / "gone")
    res = CliRunner().invoke(app, ["eval", "--model", str(tiny_model), "--out", str(link)])
    assert res.exit_code == 2, res.output
    assert f"{link} is a symbolic link to {tmp_path / 'gone'}, which does not exist" in " ".join(res.output.split())
    assert "File exists" not in res.output and not (tmp_path / "gone").exists()


def test_an_oserror_without_a_file_names_none() -> None:
    assert describe(BrokenPipeError(errno.EPIPE, "Broken pipe"))[1] == (
        "the output was closed before the command finished writing (Broken pipe); nothing else went wrong")
    assert describe(OSError(errno.ENOSPC, "No space left on device"))[1].startswith("no space left on the device. ")
    assert describe(OSError(errno.EIO, "Input/output error")) == (1, "Input/output error")
    assert describe(FileExistsError(errno.EEXIST, "File exists"))[1] == (
        "File exists (a file where a folder is needed, or the reverse)")
    for err in (OSError(errno.EIO, "x"), OSError(errno.ENOSPC, "x"), OSError(errno.EACCES, "x")):
        assert "a file" not in describe(err)[1]


# --- remedies name the command that exists ------------------------------------------------------------------------

def test_no_remedy_or_report_names_opct_select_which_only_points_to_the_lab() -> None:
    """``opct select`` is no command (issue 72): its "No such command" error names ``opct-lab select`` with the same
    arguments; every message, report line and page names the latter (the pages that describe the error excepted)."""
    roots = [REPO / "opct", REPO / "lab" / "opct_lab", REPO / "docs", REPO / "README.md"]
    allowed = {REPO / "docs" / "reliability.md", REPO / "docs" / "evaluation.md", REPO / "docs" / "development.md"}
    found = []
    for root in roots:
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.suffix not in (".py", ".md", ".txt", ".jinja", ".html", ".yaml") or path in allowed:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"\bopct select\b", line.replace("opct-lab select", "")):
                    found.append(f"{path.relative_to(REPO)}:{n}")
    assert not found, found
    out = subprocess.run([sys.executable, "-m", "opct.cli", "select", "x.yaml"], capture_output=True, text=True)
    said = " ".join((out.stderr + out.stdout).replace("│", " ").split())
    assert out.returncode == 2 and "No such command 'select'" in said and "`opct-lab select x.yaml`" in said, said
    typo = subprocess.run([sys.executable, "-m", "opct.cli", "selectx", "x.yaml"], capture_output=True, text=True)
    assert typo.returncode == 2 and "opct-lab" not in typo.stderr + typo.stdout  # only the lab's commands get the hint


def test_the_candidates_remedy_names_opct_lab_select(tmp_path: Path) -> None:
    pytest.importorskip("opct_lab")
    from opct_lab.selection.candidates import candidate_records

    with pytest.raises(FileNotFoundError, match=r"run `opct-lab select` on the selection file"):
        candidate_records(tmp_path / "cand", "bct-0")


# --- warnings in a run of several processes -----------------------------------------------------------------------

_WARN = """
import warnings
from opct.errors import OpctWarning
from opct.quiet import RankWarning, quiet_output
with quiet_output():
    warnings.warn("the same on every rank", OpctWarning)
    warnings.warn("this rank's shard is short", RankWarning)
"""


def _stderr_as(env: dict[str, str], code: str = _WARN) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env}, check=True)
    return res.stderr


def test_a_warning_prints_on_rank_0_only_and_a_rank_specific_one_on_each_rank() -> None:
    assert _stderr_as({}) == "warning: the same on every rank\nwarning: this rank's shard is short\n"
    assert _stderr_as({"RANK": "0", "WORLD_SIZE": "2"}) == (
        "warning: the same on every rank\nwarning: rank 0: this rank's shard is short\n")
    assert _stderr_as({"RANK": "1", "WORLD_SIZE": "2"}) == "warning: rank 1: this rank's shard is short\n"
    assert _stderr_as({"LOCAL_RANK": "1"}) == "warning: rank 1: this rank's shard is short\n"


def test_process_rank_reads_torch_distributed_once_initialized(monkeypatch: pytest.MonkeyPatch) -> None:
    from opct import quiet

    class Dist:
        is_available = staticmethod(lambda: True)
        is_initialized = staticmethod(lambda: True)
        get_rank = staticmethod(lambda: 3)
        get_world_size = staticmethod(lambda: 4)

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setitem(sys.modules, "torch.distributed", Dist)
    assert quiet.process_rank() == (3, 4)
    shown: list[str] = []
    show = quiet.once_per_command(lambda message, *rest: shown.append(str(message)))
    show("common", UserWarning, "f.py", 1)
    show("mine", quiet.RankWarning, "f.py", 2)
    assert shown == ["rank 3: mine"]


@pytest.mark.skipif(shutil.which("torchrun") is None and not (Path(sys.executable).parent / "torchrun").exists(),
                    reason="needs torchrun")
def test_two_real_gloo_ranks_print_a_warning_once(tmp_path: Path) -> None:
    """Two processes of torchrun (gloo, CPU): rank 1 prints only its own notice, after the launcher's variables
    are gone (so torch.distributed's rank is what decides). Each rank's stderr goes to ``<rank>.txt``."""
    script = tmp_path / "two.py"
    script.write_text("import os, sys, torch.distributed as dist\ndist.init_process_group('gloo')\n"
                      "for key in ('RANK', 'LOCAL_RANK', 'WORLD_SIZE'):\n    os.environ.pop(key)\n"
                      f"sys.stderr = open(os.path.join({str(tmp_path)!r}, f'{{dist.get_rank()}}.txt'), 'w')\n"
                      + _WARN + "sys.stderr.close()\ndist.destroy_process_group()\n", encoding="utf-8")
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    res = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", str(script)], capture_output=True,
                         text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert (tmp_path / "0.txt").read_text() == "warning: the same on every rank\nwarning: rank 0: this rank's shard is short\n"
    assert (tmp_path / "1.txt").read_text() == "warning: rank 1: this rank's shard is short\n"
