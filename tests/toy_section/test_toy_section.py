"""A toy report section, added in this folder only (no change to opct/report): registered once in SECTIONS,
it appears in report.md, report.html, report.json and the terminal summary in its place, escaped like the page,
and is left out of an experiment it does not apply to."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from toy_section import StepsSection

from opct.report import write_report
from opct.report.section import SECTIONS, Section, SectionError, ordered_sections
from opct.report.terminal import results_group
from opct.testing.synthetic_experiment import make_experiment


@pytest.fixture
def toy() -> Iterator[StepsSection]:
    section = StepsSection()
    SECTIONS.register(section.name, section)
    try:
        yield section
    finally:
        SECTIONS.unregister(section.name)


@pytest.fixture(scope="module")
def exp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exp = make_experiment(tmp_path_factory.mktemp("toy") / "exp", steps=7, with_attack=False)
    plan = json.loads((exp / "plan.json").read_text())
    plan["name"] = "toy <b>&</b>"  # shown by the toy's HTML, so it must come out escaped
    (exp / "plan.json").write_text(json.dumps(plan))
    return exp


def _last_losses(exp: Path) -> dict[str, float]:
    return {run.name: json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["loss"]
            for run in sorted((exp / "train").iterdir())}


def test_it_keeps_the_protocol_and_takes_its_place_in_the_order(toy: StepsSection) -> None:
    assert isinstance(toy, Section)
    names = [s.name for s in ordered_sections()]
    assert names.index("all-metrics") < names.index("toy-steps") < names.index("experiment")


def test_it_appears_in_the_markdown_and_the_html_in_its_place(toy: StepsSection, exp_dir: Path, tmp_path: Path) -> None:
    html, md = write_report(exp_dir, tmp_path)
    losses = _last_losses(exp_dir)
    assert set(losses) == {"bct", "opct"}
    text = md.read_text()
    for method, label in (("bct", "BCT"), ("opct", "OPCT")):
        assert f"| {label} | 7 | {losses[method]:.3f} |" in text
    assert text.index("## All metrics") < text.index("## Steps logged") < text.index("## Versions")
    page = html.read_text()
    sections = re.findall(r'<section id="([^"]+)">', page)
    assert sections.index("all-metrics") + 1 == sections.index("toy-steps") == sections.index("experiment") - 1
    toy_html = page[page.index('<section id="toy-steps">'):page.index('<section id="experiment">')]
    assert f"<td>{losses['opct']:.3f}</td>" in toy_html
    assert "toy &lt;b&gt;&amp;&lt;/b&gt;: what each run" in toy_html and "<b>&" not in toy_html


def test_its_data_goes_into_report_json(toy: StepsSection, exp_dir: Path, tmp_path: Path) -> None:
    write_report(exp_dir, tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    losses = _last_losses(exp_dir)
    assert data["sections"] == {"toy-steps": {"experiment": "toy <b>&</b>", "rows": [
        ["BCT", "7", f"{losses['bct']:.3f}"], ["OPCT", "7", f"{losses['opct']:.3f}"]]}}


def test_it_adds_its_lines_to_the_terminal_summary(toy: StepsSection, exp_dir: Path) -> None:
    console = Console(width=80, record=True, color_system=None)
    console.print(results_group(exp_dir))
    text = console.export_text()
    assert f"OPCT: 7 steps logged, last loss {_last_losses(exp_dir)['opct']:.3f}" in text


def test_an_experiment_it_does_not_apply_to_leaves_it_out(toy: StepsSection, tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"name": "untrained", "model": "m", "methods": ["base"]}))
    html, md = write_report(tmp_path)
    assert "Steps logged" not in md.read_text() and 'id="toy-steps"' not in html.read_text()
    assert "sections" not in json.loads((tmp_path / "report.json").read_text())


def test_unregistered_it_is_gone_and_the_report_is_as_before(exp_dir: Path, tmp_path: Path) -> None:
    assert "toy-steps" not in SECTIONS
    html, md = write_report(exp_dir, tmp_path)
    assert "Steps logged" not in md.read_text() and 'id="toy-steps"' not in html.read_text()
    assert "sections" not in json.loads((tmp_path / "report.json").read_text())


def test_a_registered_entry_without_the_protocol_is_named_in_the_error(exp_dir: Path, tmp_path: Path) -> None:
    class NoHtml:
        name, order = "no-html", 1

        def data(self, report: object) -> dict:
            return {}

        def markdown(self, data: dict) -> str:
            return ""

    SECTIONS.register("no-html", NoHtml())
    try:
        with pytest.raises(SectionError, match="report section 'no-html' \\(NoHtml\\) has no html: a Section has name, order"):
            write_report(exp_dir, tmp_path)
    finally:
        SECTIONS.unregister("no-html")
