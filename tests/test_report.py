"""The experiment report: table cells from the files, "—" for gaps, self-contained HTML, a real browser."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from browser import NO_BROWSER, find_browser, png_size, run_browser

from opct.report import format_results_table, load_experiment, write_report
from opct.report.metric import parse_metric
from opct.report.paired import paired_differences
from opct.report.render import render_pages
from opct.report.sections.comparisons import attack_howto
from opct.report.table import MISSING, build_table, format_metric
from opct.testing.synthetic_experiment import make_experiment

FIGURES = {"axis_sycophancy", "axis_jailbreak", "axis_awareness", "safety_curve", "capability", "training"}
#: Appended to a copy of the report for the browser test only: lists every image's decoded size after load.
IMG_PROBE = (
    '<script>window.addEventListener("load", () => { const p = document.createElement("pre"); p.id = "img-probe";'
    " p.textContent = JSON.stringify([...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]));"
    " document.body.appendChild(p); });</script>"
)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    exp = make_experiment(tmp_path_factory.mktemp("exp") / "synthetic")
    html, md = write_report(exp)
    return exp, html, md


def _results(exp: Path, method: str, eval_name: str) -> dict:
    return json.loads((exp / "eval" / method / eval_name / "results.json").read_text())


def test_table_cells_come_from_the_files(report: tuple[Path, Path, Path]) -> None:
    exp, _, _ = report
    table = build_table(load_experiment(exp))
    by_key = {c.key: c for c in table.columns}
    raw = _results(exp, "base", "sycophancy")["metrics"]["sycophancy_rate"]
    expected = f"{raw['value'] * 100:.1f}% [{raw['ci_low'] * 100:.1f}, {raw['ci_high'] * 100:.1f}] (n={raw['n']})"
    assert table.cell("base", by_key["sycophancy"]) == expected == "41.0% [35.9, 46.1] (n=360)"
    aw = _results(exp, "opct", "awareness")["metrics"]["ausc_101"]
    assert table.cell("opct", by_key["awareness"]) == f"{aw['value']:.3f} [{aw['ci_low']:.3f}, {aw['ci_high']:.3f}] (n=50)"
    assert "101-threshold" in by_key["awareness"].title
    attack = json.loads((exp / "attack" / "opct" / "results.json").read_text())["metrics"]["dsr"]
    assert table.cell("opct", by_key["dsr_adaptive"]).startswith(f"{attack['value'] * 100:.1f}% [")
    assert table.cell("bct", by_key["dsr_static"]) == "80.0% [76.1, 83.9] (n=400)"
    assert [c.key for c in table.columns][-2:] == ["cap:capability_mc", "cap:capability_arithmetic"]


def test_missing_metrics_render_as_dash(report: tuple[Path, Path, Path]) -> None:
    exp, _, _ = report
    table = build_table(load_experiment(exp))
    by_key = {c.key: c for c in table.columns}
    assert table.cell("bct", by_key["cap:capability_arithmetic"]) == MISSING  # no results.json
    assert table.cell("base", by_key["dsr_adaptive"]) == MISSING  # attacker not run against base
    text = format_results_table(exp)
    assert "41.0% [35.9, 46.1] (n=360)" in text and "15.4%" in text and "not a reproduction target" in text
    assert format_metric(parse_metric({"value": float("nan"), "ci_low": 0, "ci_high": 1, "n": 0})) == MISSING
    assert format_metric(parse_metric(0.5)) == "50.0%"


def test_static_defense_is_labelled_without_attacker(tmp_path: Path) -> None:
    exp = make_experiment(tmp_path / "exp", steps=5, with_attack=False)
    table = build_table(load_experiment(exp))
    headers = " ".join(table.headers)
    assert "static" in headers and "adaptive" not in headers


def test_empty_experiment_still_reports(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"name": "empty", "model": "m", "methods": ["base", "bct", "opct"]}))
    html, md = write_report(tmp_path)
    assert "| BCT | — | — | — |" in md.read_text()
    assert "<img" not in html.read_text()


def test_markdown_has_table_and_figure_links(report: tuple[Path, Path, Path]) -> None:
    exp, _, md = report
    text = md.read_text()
    assert "| base | 41.0% [35.9, 46.1] (n=360) |" in text
    assert "| OPCT | 8.1% | ≈99% |" in text
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert {Path(link).stem for link in links} == FIGURES
    assert all((exp / link).is_file() for link in links)


def test_html_is_self_contained(report: tuple[Path, Path, Path]) -> None:
    exp, html, _ = report
    text = html.read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", text, re.IGNORECASE)
    srcs = re.findall(r"""<img[^>]*\ssrc="([^"]*)\"""", text)
    assert len(srcs) == len(FIGURES) and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert {p.stem for p in (exp / "figures").glob("*.png")} == FIGURES
    assert "<details>" in text and "manifest.json" in text


def test_html_escapes_inserted_text(tmp_path: Path) -> None:
    exp_dir = make_experiment(tmp_path / "exp", steps=3)
    plan = json.loads((exp_dir / "plan.json").read_text())
    plan["name"] = 'x <script>alert("1")</script> & y'
    (exp_dir / "plan.json").write_text(json.dumps(plan))
    exp = load_experiment(exp_dir)
    table = build_table(exp)
    text = render_pages(exp, table, paired_differences(exp, table.columns), [], "now")[0]
    assert "<script>" not in text
    assert "x &lt;script&gt;alert(&#34;1&#34;)&lt;/script&gt; &amp; y" in text  # escaped by Jinja2 autoescape


def test_html_opens_in_headless_chromium(report: tuple[Path, Path, Path], tmp_path: Path) -> None:
    browser = find_browser()
    if browser is None:
        pytest.skip(NO_BROWSER)
    _, html, _ = report
    probe = tmp_path / "probe.html"
    probe.write_text(html.read_text().replace("</body>", IMG_PROBE + "</body>"))
    dom = run_browser(browser, tmp_path / "profile-dom", "--dump-dom", probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'id="results-table"' in dom.stdout and "41.0%" in dom.stdout and "[35.9, 46.1]" in dom.stdout
    found = re.search(r'<pre id="img-probe">([^<]*)</pre>', dom.stdout)
    assert found, "image probe did not run"
    images = json.loads(found.group(1))
    assert len(images) == len(FIGURES)
    assert all(done and w > 300 and h > 200 for done, w, h in images), images

    shot = tmp_path / "report.png"
    run = run_browser(browser, tmp_path / "profile-shot", "--window-size=1280,2400", f"--screenshot={shot}", html.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    assert png_size(shot) == (1280, 2400)
    assert shot.stat().st_size > 100_000  # a blank page compresses to a few kB


def test_attack_section_reports_the_static_baseline_and_what_the_search_added(report: tuple[Path, Path, Path]) -> None:
    exp, html, md = report
    text = md.read_text(encoding="utf-8")
    section = text.split("## Adaptive attacker", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| method")}
    assert set(rows) == {"BCT", "OPCT"}  # no attack against base
    dsr = json.loads((exp / "attack" / "bct" / "results.json").read_text())["metrics"]["dsr"]
    assert rows["BCT"][0].startswith(f"{dsr['value'] * 100:.1f}% [")
    assert rows["BCT"][1:] == ["30/100", "28/30", "12", "12.0"]
    assert rows["OPCT"][1:4] == [MISSING] * 3  # no static baseline recorded for OPCT
    assert 'id="attack"' in html.read_text(encoding="utf-8")


def test_attack_section_says_when_the_static_baseline_was_not_run(report: tuple[Path, Path, Path], tmp_path: Path) -> None:
    exp, _, md = report
    assert "static baseline was not run" not in md.read_text(encoding="utf-8")  # BCT has it
    copy = tmp_path / "no-static"
    shutil.copytree(exp, copy)
    res_file = copy / "attack" / "bct" / "results.json"
    res = json.loads(res_file.read_text())
    res.pop("static")
    res_file.write_text(json.dumps(res))
    _, md2 = write_report(copy)
    section = md2.read_text(encoding="utf-8").split("## Adaptive attacker", 1)[1].split("\n## ", 1)[0]
    assert "static baseline was not run here" in section
    assert attack_howto(load_experiment(copy)) in section
