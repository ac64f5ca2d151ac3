"""The terminal tables of `opct run` / `opct demo` / `opct report`: every line fits 80 columns, no number is split."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from opct.report import format_results_table, load_experiment
from opct.report.paired import paired_parts
from opct.report.table import PAPER_ROWS, build_table, format_metric
from opct.report.terminal import results_group
from opct.testing.synthetic_experiment import make_experiment

#: A number as printed in a cell: 41.0%, [35.9, 46.1], -9.2 pts, +0.238, n=360, ≈87%, −28.
NUMBER = re.compile(r"[+\-−≈]?\d+(?:\.\d+)?%?")


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_experiment(tmp_path_factory.mktemp("exp") / "synthetic", samples=True)


def _render(exp: Path, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(results_group(exp, width))
    return console.export_text()


def _cell_texts(exp: Path) -> list[str]:
    """Every cell of the three tables as one string (results, paired differences, the paper's)."""
    loaded = load_experiment(exp)
    table = build_table(loaded)
    cells = [table.cell(m, c) for m in table.methods for c in table.columns]
    _, rows = paired_parts(loaded, table.columns)
    cells += [" ".join(cell) for _, row in rows for cell in row]
    return cells + [cell for row in PAPER_ROWS for cell in row[1:]]


@pytest.mark.parametrize("width", [80, 60])
def test_every_line_fits_and_no_number_is_split(experiment: Path, width: int) -> None:
    text = _render(experiment, width)
    too_wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not too_wide, "\n".join(too_wide)
    wanted = Counter(n for cell in _cell_texts(experiment) for n in NUMBER.findall(cell))
    shown = Counter(NUMBER.findall(text))
    assert not wanted - shown, f"numbers split or missing: {wanted - shown}\n{text}"


def test_the_tables_are_transposed_and_keep_intervals_whole(experiment: Path) -> None:
    text = _render(experiment, 80)
    assert "41.0%" in text and "[35.9, 46.1]" in text and "(n=360)" in text  # base's held-out sycophancy
    header = next(line for line in text.splitlines() if "base" in line and "BCT" in line and "OPCT" in line)
    assert header.split("│")[1].strip() == "metric"  # one row per metric, one column per method
    assert "OPCT − BCT" in text and "(k=40)" in text  # the paired differences
    assert "paper (arXiv 2605.21834)" in text and "≈99%" in text and "not a reproduction target" in " ".join(text.split())
    wide = format_results_table(experiment)  # the wide plain-text table (report.md's layout) is unchanged
    assert max(len(line) for line in wide.splitlines()) > 120
    assert format_metric(build_table(load_experiment(experiment)).metrics[("base", "sycophancy")]) in wide


def test_a_narrow_terminal_splits_the_methods_over_tables(experiment: Path) -> None:
    text = _render(experiment, 48)
    assert max(cell_len(line) for line in text.splitlines()) <= 48
    assert text.count("│ metric") > 3  # each table repeated with its metric column


def test_opct_report_prints_the_terminal_tables(experiment: Path) -> None:
    from opct.cli.boundary import console
    from opct.cli.main import app

    res = CliRunner().invoke(app, ["report", str(experiment)])
    assert res.exit_code == 0, res.output
    assert max(cell_len(line) for line in res.output.splitlines()) <= console.width
    assert "│ metric" in res.output and "OPCT − BCT" in res.output and "report.html" in res.output


def test_opct_report_ends_with_the_verdict_block_one_line_per_metric(experiment: Path) -> None:
    """The terminal output's last block is the verdict: its title, then each OPCT − BCT metric's sentence
    (report.html's verdict lines), wrapped at spaces but never inside an interval."""
    from opct.cli.main import app
    from opct.report.paired import paired_differences
    from opct.report.terminal import VERDICT_TITLE
    from opct.report.verdict import verdict_lines

    res = CliRunner().invoke(app, ["report", str(experiment)])
    assert res.exit_code == 0, res.output
    loaded = load_experiment(experiment)
    lines = verdict_lines(paired_differences(loaded, build_table(loaded).columns))
    assert len(lines) >= 3
    tail = res.output.rstrip().split(VERDICT_TITLE)[-1]
    assert VERDICT_TITLE in res.output and "report: " not in tail and "│" not in tail  # nothing after the block
    items = [" ".join(item.split()) for item in tail.split("\n- ")[1:]]
    assert items == [" ".join(v.sentence().split()) for v in lines]
    for line in tail.strip().splitlines():
        assert line.count("[") == line.count("]") and cell_len(line) <= 80, line  # an interval never split
