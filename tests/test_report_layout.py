"""The report leads with its answer (issue 42): the verdict block, the forest plot, warnings as sentences by run,
tables that fit the page and figure text a reader can read, in a real headless Chromium at 1300 × 900."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest
from browser import NO_BROWSER, find_browser, run_browser

from opct.report import load_experiment, write_report
from opct.report.figure_style import MAX_WIDTH_IN
from opct.report.forest import plot_forest
from opct.report.paired import paired_differences
from opct.report.pooled import NOT_MEASURED, PAPER_PAIR, paper_direction, verdict
from opct.report.sections.recipes import selection_data
from opct.report.table import build_table
from opct.report.verdict import verdict_lines
from opct.runs.experiment_layout import REPORT_JSON
from opct.testing.synthetic_experiment import make_experiment

#: What the browser measures after load, every <details> opened: where the verdict block ends, each table
#: that scrolls sideways, and each figure's smallest text as drawn on the screen.
LAYOUT_PROBE = (
    '<script>window.addEventListener("load", () => { document.querySelectorAll("details").forEach(d => { d.open = true; });'
    ' const v = document.querySelector("ul.verdicts"), r = v ? v.getBoundingClientRect() : null;'
    ' const scrolls = [...document.querySelectorAll("div.scroll")].filter(d => d.scrollWidth > d.clientWidth + 1)'
    '.map(d => d.querySelector("th") ? d.querySelector("th").textContent : "?");'
    ' const figs = [...document.querySelectorAll("img[data-text-px]")].map(i => [i.alt,'
    ' parseFloat(i.dataset.textPx) * i.getBoundingClientRect().width / i.naturalWidth]);'
    ' const p = document.createElement("pre"); p.id = "layout-probe";'
    ' p.textContent = JSON.stringify({verdict: r && [r.top, r.bottom], scrolls, figs, page: document.documentElement.scrollWidth});'
    ' document.body.appendChild(p); });</script>'
)


@pytest.fixture(scope="module")
def exp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic experiment with per-sample records (so, paired differences), OPCT's held-out sycophancy
    eval INCOMPLETE and an ACT candidate in a selection that ran no ACT."""
    exp = make_experiment(tmp_path_factory.mktemp("layout") / "exp", samples=True)
    path = exp / "eval" / "opct" / "sycophancy" / "results.json"
    data = json.loads(path.read_text())
    data.update(status="incomplete", unscored=30, n_records=480, max_unscored=0.05,
                outcomes={"scored": 450, "empty": 20, "truncated": 10, "unparsed": 0})
    path.write_text(json.dumps(data))
    write_report(exp)
    return exp


def _selection() -> dict:
    step = {"eligible": True, "val_teacher_kl": 0.1, "val_good": 0.9, "val_cap": {"mc": 0.9}, "compute": {"train_seconds": 3}}
    return {"candidates": [{"id": f"{m}-01", "method": m, "recipe": {"optim.lr": 1e-3}, "steps": {"20": step}} for m in ("bct", "opct", "act")],
            "chosen": {m: {"teacher_kl": {"candidate": f"{m}-01", "step": 20, "recipe": {"optim.lr": 1e-3}, "val_teacher_kl": 0.1,
                                          "val_good": 0.9}} for m in ("bct", "opct", "act")}}


def test_verdict_lines_read_opct_minus_bct_against_the_paper(exp_dir: Path) -> None:
    exp = load_experiment(exp_dir)
    table = build_table(exp)
    differences = paired_differences(exp, table.columns)
    lines = verdict_lines(differences)
    paper_pair = [d for d in differences if (d.a, d.b) == PAPER_PAIR]
    assert [v.difference for v in lines] == paper_pair and len(lines) >= 4
    for line in lines:
        est = line.difference.estimate
        assert line.side == (paper_direction(line.difference.column.key) or (None,))[0]
        assert line.verdict == (verdict(line.side, est.ci_low, est.ci_high) if est else NOT_MEASURED)
    assert [v.verdict for v in lines if v.difference.column.key == "cap:capability_arithmetic"] == [NOT_MEASURED]  # BCT has none
    syco = next(v for v in lines if v.difference.column.key == "sycophancy")
    assert syco.difference.incomplete and syco.difference_text.endswith("INCOMPLETE")  # OPCT's side is incomplete

    html = (exp_dir / "report.html").read_text(encoding="utf-8")
    order = [html.index(s) for s in ('<ul class="verdicts">', 'alt="forest"', '<section id="results">', '<section id="paired">')]
    assert order == sorted(order)  # the answer, then every difference, then the details
    assert html.count('<li class="') >= len(lines) and f"OPCT − BCT {syco.difference_text}" in html

    data = json.loads((exp_dir / REPORT_JSON).read_text(encoding="utf-8"))
    assert [(r["key"], r["verdict"], r["text"]) for r in data["verdict"]] == [
        (v.difference.column.key, v.verdict, v.difference_text) for v in lines]
    assert data["created"] == "2026-01-01T00:00:00+0000" and data["results"]["base"]["sycophancy"]["value"] == 0.41


def test_warnings_are_sentences_grouped_by_run(exp_dir: Path) -> None:
    html = (exp_dir / "report.html").read_text(encoding="utf-8")
    warnings = html[html.index('<details class="warn"'):html.index("</details>", html.index('<details class="warn"'))]
    assert "{" not in warnings and str(exp_dir) not in warnings  # no dict reprs, no absolute paths
    assert "<h4>OPCT</h4>" in warnings
    assert ("sycophancy: INCOMPLETE. 30 of 480 answers were unscored (20 empty, 10 truncated), more than its limit of 5%, "
            "so its numbers are not a measurement.") in unescape(warnings)
    md = (exp_dir / "report.md").read_text(encoding="utf-8")
    assert "**Warnings: OPCT**" in md and md.index("## Verdict") < md.index("**Warnings: OPCT**") < md.index("## Results")


def test_the_forest_plot_has_every_paired_difference_and_fits_the_column(exp_dir: Path) -> None:
    exp = load_experiment(exp_dir)
    differences = paired_differences(exp, build_table(exp).columns)
    fig = plot_forest(differences)
    assert fig is not None and fig.get_figwidth() <= MAX_WIDTH_IN
    panels = [ax for ax in fig.axes if ax.get_visible()]
    measured = {d.column.key for d in differences if d.estimate is not None}
    assert len(measured) >= 4 and len(panels) == len(measured)  # one panel per column with a difference
    assert sum(len(ax.get_yticklabels()) for ax in panels) == sum(d.column.key in measured for d in differences)
    assert plot_forest([]) is None


def test_the_selection_table_lists_only_the_methods_of_the_run(exp_dir: Path) -> None:
    exp = load_experiment(exp_dir)
    exp.selection = _selection()
    text = json.dumps(selection_data(exp))
    assert "bct-01" in text and "opct-01" in text and "act-01" not in text and "act, teacher_kl" not in text


def test_the_first_screen_shows_the_verdict_and_nothing_scrolls_sideways_in_headless_chromium(exp_dir: Path, tmp_path: Path) -> None:
    browser = find_browser()
    if browser is None:
        pytest.skip(NO_BROWSER)
    probe = exp_dir / "layout-probe.html"
    probe.write_text((exp_dir / "report.html").read_text(encoding="utf-8").replace("</body>", LAYOUT_PROBE + "</body>"))
    try:
        run = run_browser(browser, tmp_path / "profile", "--window-size=1300,900", "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="layout-probe">([^<]*)</pre>', run.stdout)
    assert found, "layout probe did not run"
    seen = json.loads(unescape(found.group(1)))
    assert seen["verdict"] is not None and 0 < seen["verdict"][0] < seen["verdict"][1] <= 900  # whole, on the first screen
    assert seen["scrolls"] == []  # no table wider than the page's column
    assert seen["page"] <= 1300
    assert len(seen["figs"]) >= 6 and all(px >= 10.0 for _, px in seen["figs"]), seen["figs"]


def test_results_cells_that_list_what_was_left_out_still_fit_1300_px_and_no_figure_has_a_file_caption(tmp_path: Path) -> None:
    """Every cell's n part lists what was left out of n and what was counted wrong (as the demo's do): the
    Results table still fits the page's column at 1300 px (the interval kept on one line, the n part wrapping), and no figure carries
    its file name as a stray caption (issue 60)."""
    exp = make_experiment(tmp_path / "wide", samples=True)
    for path in exp.glob("eval/*/*/results.json"):
        data = json.loads(path.read_text())
        for metric in data["metrics"].values():
            if isinstance(metric, dict):
                metric.update(unscored={"empty": 12, "unparsed": 3, "judge abstained": 2}, counted_wrong={"truncated": 22})
        path.write_text(json.dumps(data))
    write_report(exp)
    html = (exp / "report.html").read_text(encoding="utf-8")
    assert "(n=360; 12 empty; 3 unparsed; 2 judge abstained; 22 truncated counted wrong)" in html
    assert "<figcaption>" not in html and "figures/forest.png" not in html
    browser = find_browser()
    if browser is None:
        pytest.skip(NO_BROWSER)
    probe = exp / "layout-probe.html"
    probe.write_text(html.replace("</body>", LAYOUT_PROBE + "</body>"))
    run = run_browser(browser, tmp_path / "profile", "--window-size=1300,900", "--dump-dom", probe.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="layout-probe">([^<]*)</pre>', run.stdout)
    assert found, "layout probe did not run"
    seen = json.loads(unescape(found.group(1)))
    assert seen["scrolls"] == [] and seen["page"] <= 1300
