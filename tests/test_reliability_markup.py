"""User text is never Rich markup: an id, a path or a model name holding ``[/x]``, ``[link=...]`` or ``[bold]``
is printed as written by every CLI error path (the error boundary, ``_fail``, a file's problem list), never
crashing the printer (Rich's ``MarkupError``) nor styling the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import make_pairs, run_config
from typer.testing import CliRunner

from opct.cli.main import app

MARKUP = ["[/x]", "[link=https://evil.example]click[/link]", "[bold]loud[/bold]"]


def _plain(res, *texts: str) -> None:
    """The command failed with a one-line error showing every ``text`` as written, and no traceback."""
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: ") or "error:" not in res.output
    for text in texts:
        assert text in res.output, res.output
    assert "Traceback" not in res.output and "MarkupError" not in res.output and not isinstance(res.exception, Exception)


def test_the_duplicate_id_probe_prints_the_real_error_as_plain_text(tiny_model, tmp_path: Path) -> None:
    """Issue 61's probe: a pair id holding ``[/bogus]``, given twice, made ``opct train`` die with a MarkupError."""
    rows = make_pairs(4)
    rows[1]["id"] = rows[0]["id"] = "p[/bogus]"
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(run_config(tiny_model, pairs, tmp_path / "out")))
    res = CliRunner().invoke(app, ["train", "--no-progress", "-c", str(cfg)])
    _plain(res, "duplicate id 'p[/bogus]'")


@pytest.mark.parametrize("markup", MARKUP)
def test_a_model_name_with_markup_in_the_error_boundary(markup: str, tmp_path: Path) -> None:
    model = f"./no-such-{markup}"
    res = CliRunner().invoke(app, ["eval", "--model", model, "--evals", "capability"])
    _plain(res, markup)


@pytest.mark.parametrize("markup", MARKUP)
def test_a_path_with_markup_in_a_commands_own_failure(markup: str, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["model", "tiny", str(tmp_path / "m"), "--tokenizer", f"./tok-{markup}"])
    _plain(res, markup)


@pytest.mark.parametrize("markup", MARKUP)
def test_a_folder_with_markup_refused_by_report(markup: str, tmp_path: Path) -> None:
    folder = tmp_path / f"exp-{markup.replace('/', '_')}"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    res = CliRunner().invoke(app, ["report", str(folder)], terminal_width=400)
    _plain(res, folder.name)


@pytest.mark.parametrize("markup", MARKUP)
def test_pair_file_problems_with_markup_are_listed_as_written(markup: str, tmp_path: Path) -> None:
    rows = make_pairs(2)
    rows[1]["id"] = rows[0]["id"] = f"id-{markup}"
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["pairs", "validate", str(path), str(tmp_path / f"missing-{markup.replace('/', '_')}.jsonl")],
                             terminal_width=400)
    assert res.exit_code == 1, res.output
    assert f"duplicate id 'id-{markup}'" in res.output and "missing-" in res.output
    assert "Traceback" not in res.output and "MarkupError" not in res.output and not isinstance(res.exception, Exception)
