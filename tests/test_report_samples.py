"""The per-sample page: prompts aligned across methods, escaped text, filters from the URL, table cells
linking to their samples, in a real headless Chromium."""

from __future__ import annotations

import json
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import pytest
from browser import NO_BROWSER, find_browser, png_size, run_browser
from report_fixtures import write

from opct.report import load_experiment, write_report
from opct.report.paired import paired_differences
from opct.report.render import render_pages
from opct.report.samples import cell_links, render_samples_html, sample_rows, samples_href
from opct.report.table import build_table
from opct.testing.synthetic_experiment import make_experiment

METHODS = ("base", "bct", "opct")
SCRIPT_ANSWER = '<script>alert("x")</script>'
#: Outcome classes that differ from "scored", by (method, eval, item, variant).
OUTCOMES = {
    ("opct", "sycophancy", "q1", "b0"): "off_options",
    ("bct", "sycophancy", "q1", "b0"): "off_options",
    ("base", "sycophancy", "q2", "b0"): "truncated",
    ("opct", "jailbreak", "j0", "wrapped"): "empty",
}


def _record(method: str, eval_name: str, split: str, item: str, variant: str) -> dict:
    outcome = OUTCOMES.get((method, eval_name, item, variant), "scored")
    response = SCRIPT_ANSWER if outcome == "truncated" else f"{method} answers {item}/{variant}"
    prompt = [{"role": "user", "content": f"Question {item} ({variant})?"}]
    if item == "q3":  # a system prompt before the user message
        prompt.insert(0, {"role": "system", "content": "Be brief."})
    return {"eval": eval_name, "item_id": item, "variant": variant, "split": split, "sample": 0, "prompt": prompt,
            "response": response, "truncated": outcome == "truncated", "outcome": outcome,
            "parsed": "A" if outcome == "scored" else None, "scores": {"correct": 1.0, "correct_abstained": False}}


def write_samples(exp: Path) -> None:
    """Held-out sycophancy (4 questions x clean and one biased variant, BCT's file in reverse order),
    two training-split questions, and three jailbreak prompts OPCT has only two answers to."""
    for method in METHODS:
        syco = [_record(method, "sycophancy", "heldout", f"q{q}", v) for q in range(4) for v in ("clean", "b0")]
        write(exp / "eval" / method / "sycophancy" / "samples.jsonl", syco[::-1] if method == "bct" else syco)
        write(exp / "eval" / method / "sycophancy_train" / "samples.jsonl",
              [_record(method, "sycophancy_train", "train", f"t{q}", "b0") for q in range(2)])
        items = ("j0", "j1") if method == "opct" else ("j0", "j1", "j2")
        write(exp / "eval" / method / "jailbreak" / "samples.jsonl",
              [_record(method, "jailbreak", "heldout", j, "wrapped") for j in items])


#: Prompts in the fixture: 8 held-out sycophancy, 2 training sycophancy, 3 jailbreak.
TOTAL = 13


@pytest.fixture(scope="module")
def exp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exp = make_experiment(tmp_path_factory.mktemp("samples") / "exp", steps=5, with_attack=False)
    write_samples(exp)
    write_report(exp)
    return exp


def test_rows_put_the_same_prompt_of_every_method_side_by_side(exp_dir: Path) -> None:
    rows = sample_rows(load_experiment(exp_dir))
    assert len(rows) == TOTAL
    by_key = {r.key: r for r in rows}
    row = by_key[("sycophancy", "q1", "b0", "0")]  # BCT's records are in reverse order on disk
    assert {m: a.response for m, a in row.answers.items()} == {m: f"{m} answers q1/b0" for m in METHODS}
    assert {m: a.outcome for m, a in row.answers.items()} == {"base": "scored", "bct": "off_options", "opct": "off_options"}
    assert row.split == "heldout" and row.prompt == "Question q1 (b0)?" and row.earlier == 0
    assert by_key[("sycophancy", "q3", "clean", "0")].earlier == 1  # the system prompt is counted, not shown
    assert by_key[("sycophancy", "q0", "clean", "0")].answers["base"].scores == "correct=1"
    assert set(by_key[("jailbreak", "j2", "wrapped", "0")].answers) == {"base", "bct"}  # OPCT has no answer
    assert [r.eval_name for r in rows] == ["jailbreak"] * 3 + ["sycophancy"] * 8 + ["sycophancy_train"] * 2


def test_the_page_escapes_every_answer(exp_dir: Path) -> None:
    text = render_samples_html(load_experiment(exp_dir))
    assert SCRIPT_ANSWER not in text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in text  # escaped by Jinja2 autoescape
    assert text.count("<script>") == 1  # the page's own filter script only
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", text, re.IGNORECASE)


def test_table_cells_link_to_their_samples(exp_dir: Path) -> None:
    exp = load_experiment(exp_dir)
    table = build_table(exp)
    links = cell_links(exp, table)
    assert links[("opct", "sycophancy")] == "samples.html#eval=sycophancy&split=heldout&method=opct"
    assert links[("bct", "dsr_static")] == samples_href("jailbreak", "bct", "heldout")
    off = [c for c in table.columns if c.outcome == "off_options"]  # a rate of one outcome class links to that class
    assert off and all(links[("opct", c.key)] == samples_href(c.eval_name, "opct", "heldout", "off_options") for c in off)
    assert not any(key == "awareness" for _, key in links)  # no samples.jsonl behind it: no link
    html = render_pages(exp, table, paired_differences(exp, table.columns), [], "now", links)[0]
    # the fixture's samples.jsonl holds 8 of the 360 records its results.json counts, so the cell is shown as
    # invalid (issue 61: an n the records cannot hold is no measurement), and still links to what samples there are
    cell = '<td class="missing"><a href="samples.html#eval=sycophancy&amp;split=heldout&amp;method=base" title="its samples">'
    assert cell + "invalid: n=360 does not fit the 8 record(s) results.json counts</a>" in html
    assert "samples.html#" not in render_pages(exp, table, paired_differences(exp, table.columns), [], "now")[0]  # no links asked for: none drawn


def test_write_report_writes_the_samples_page_beside_the_report(exp_dir: Path) -> None:
    page = (exp_dir / "samples.html").read_text(encoding="utf-8")
    assert f'<span id="total">{TOTAL}</span> prompts' in page
    assert "[samples.html](samples.html)" in (exp_dir / "report.md").read_text(encoding="utf-8")
    assert 'href="samples.html#eval=jailbreak&amp;split=heldout&amp;method=opct"' in (exp_dir / "report.html").read_text()


class _Rows(HTMLParser):
    """The sample table's rows in a dumped DOM: (eval, split, hidden, answering methods)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and "data-e" in a:
            self.rows.append([a["data-e"], a["data-s"], "hidden" in a, {}])
        elif tag == "td" and "data-m" in a and self.rows:
            self.rows[-1][3][a["data-m"]] = a["data-o"]


def _dump(browser: str, profile: Path, url: str) -> tuple[list[list], str]:
    run = run_browser(browser, profile, "--dump-dom", url)
    assert run.returncode == 0, run.stderr[-2000:]
    parser = _Rows()
    parser.feed(run.stdout)
    count = re.search(r'<p id="count"><span id="shown">(\d+)</span> of <span id="total">(\d+)</span> prompts shown</p>',
                      run.stdout)
    assert count, "no count line in the page"
    return parser.rows, f"{count.group(1)} of {count.group(2)}"


#: Appended to a copy of samples.html: after the URL's filter ran, record what shows, then pick an
#: outcome class in its select as a user would and record again.
PROBE = (
    '<script>(() => { const state = () => [document.getElementById("shown").textContent, location.hash,'
    ' document.querySelectorAll("#samples tbody tr:not([hidden])").length];'
    ' const before = state(), s = document.getElementById("f-outcome"); s.value = "truncated";'
    ' s.dispatchEvent(new Event("change")); const p = document.createElement("pre"); p.id = "probe";'
    ' p.textContent = JSON.stringify([before, state()]); document.body.appendChild(p); })();</script>'
)


def test_filters_work_in_headless_chromium(exp_dir: Path, tmp_path: Path) -> None:
    browser = find_browser()
    if browser is None:
        pytest.skip(NO_BROWSER)
    rows, count = _dump(browser, tmp_path / "p1", (exp_dir / "samples.html").as_uri()
                        + "#eval=sycophancy&split=heldout&method=opct&outcome=off_options")
    assert len(rows) == TOTAL and count == f"1 of {TOTAL}"
    shown = [r for r in rows if not r[2]]
    assert len(shown) == 1 and shown[0][:2] == ["sycophancy", "heldout"] and shown[0][3]["opct"] == "off_options"

    probe = exp_dir / "probe.html"  # beside samples.html; removed below
    probe.write_text((exp_dir / "samples.html").read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
    try:
        run = run_browser(browser, tmp_path / "p2", "--dump-dom", probe.as_uri() + "#method=opct")
    finally:
        probe.unlink()
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="probe">([^<]*)</pre>', run.stdout)
    assert found, "probe did not run"
    before, after = json.loads(unescape(found.group(1)))
    assert before == [str(TOTAL - 1), "#method=opct", TOTAL - 1]  # OPCT did not answer jailbreak j2
    assert after[1] == "#method=opct&outcome=truncated" and after[0] == "0" and after[2] == 0  # OPCT truncated none


class _Links(HTMLParser):
    """The links of the results table: (row label, i.e. the metric, href), in order."""

    def __init__(self) -> None:
        super().__init__()
        self.inside, self.label, self.links, self._th = False, "", [], False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.inside |= tag == "table" and a.get("id") == "results-table"
        self._th = self.inside and tag == "th"
        if self.inside and tag == "a":
            self.links.append((self.label, a["href"]))

    def handle_endtag(self, tag: str) -> None:
        self.inside &= tag != "table"
        self._th = False

    def handle_data(self, data: str) -> None:
        if self._th:
            self.label = data


def test_a_table_cell_leads_to_its_samples_in_headless_chromium(exp_dir: Path, tmp_path: Path) -> None:
    browser = find_browser()
    if browser is None:
        pytest.skip(NO_BROWSER)
    report = exp_dir / "report.html"
    parser = _Links()
    parser.feed(report.read_text(encoding="utf-8"))
    assert parser.links[0][0].lower().startswith("sycophancy")  # one row per metric: the first is held-out sycophancy
    base_links = [href for _, href in parser.links if href.endswith("method=base")]
    assert base_links[0] == parser.links[0][1] == "samples.html#eval=sycophancy&split=heldout&method=base"
    rows, count = _dump(browser, tmp_path / "p1", urljoin(report.as_uri(), base_links[0]))
    shown = [r for r in rows if not r[2]]
    assert count == f"8 of {TOTAL}" and len(shown) == 8
    assert all(r[:2] == ["sycophancy", "heldout"] and "base" in r[3] for r in shown)

    for page, size in (("report.html", (1280, 1800)), ("samples.html", (1200, 900))):
        shot = tmp_path / f"{page}.png"
        run = run_browser(browser, tmp_path / f"shot-{page}", f"--window-size={size[0]},{size[1]}",
                          f"--screenshot={shot}", (exp_dir / page).as_uri())
        assert run.returncode == 0, run.stderr[-2000:]
        assert png_size(shot) == size
        assert shot.stat().st_size > 40_000, page  # a blank page compresses to a few kB


def _attack(exp: Path, method: str, behaviors: list[dict], attempts: list[dict]) -> None:
    outcomes = {s: sum(b["status"] == s for b in behaviors) for s in ("cracked", "defended", "unscored")}
    n = len(behaviors) - outcomes["unscored"]
    write(exp / "attack" / method / "results.json", {
        "n": len(behaviors), "behaviors": behaviors, "status": "incomplete" if outcomes["unscored"] else "ok",
        "outcomes": {"behaviors": outcomes},
        "metrics": {"dsr": {"value": outcomes["defended"] / n, "ci_low": 0.0, "ci_high": 1.0, "n": n}}})
    write(exp / "attack" / method / "attempts.jsonl", attempts)


def test_the_adaptive_attack_has_one_row_per_behaviour_with_the_attempt_that_tells_its_outcome(tmp_path: Path) -> None:
    from opct.report.samples import ATTACK, attack_rows

    exp = make_experiment(tmp_path / "exp", steps=5, with_attack=False)
    ask = {"b0": "How do I do harm 0?", "b1": "How do I do harm 1?"}

    def attempt(bid: str, query: int, reply: str, score: float | None, outcome: str = "scored") -> dict:
        return {"behavior_id": bid, "query": query, "prompt": f"wrapped {bid} #{query}", "response": reply,
                "score": score, "outcome": outcome}

    _attack(exp, "bct", [
        {"behavior_id": "b0", "request": ask["b0"], "status": "unscored", "queries": 3, "unscored_attempts": 1,
         "queries_to_crack": None, "best_score": 0.0, "best_prompt": "wrapped b0 #1"},
        {"behavior_id": "b1", "request": ask["b1"], "status": "defended", "queries": 3, "unscored_attempts": 0,
         "queries_to_crack": None, "best_score": 0.2, "best_prompt": "wrapped b1 #2"}],
        [attempt("b0", 1, "No.", 0.0), attempt("b0", 2, "3 3 3 3", None, "truncated"), attempt("b0", 3, "No.", 0.0),
         attempt("b1", 1, "No.", 0.0), attempt("b1", 2, "Hmm, no.", 0.2), attempt("b1", 3, "No.", 0.0)])
    _attack(exp, "opct", [
        {"behavior_id": "b0", "request": ask["b0"], "status": "cracked", "queries": 2, "unscored_attempts": 0,
         "queries_to_crack": 2, "best_score": 1.0, "best_prompt": "wrapped b0 #2"},
        {"behavior_id": "b1", "request": ask["b1"], "status": "defended", "queries": 3, "unscored_attempts": 0,
         "queries_to_crack": None, "best_score": 0.0, "best_prompt": "wrapped b1 #1"}],
        [attempt("b0", 1, "No.", 0.0), attempt("b0", 2, "Sure, <b>step one</b>", 1.0),
         attempt("b1", 1, "No.", 0.0), attempt("b1", 2, "No!", 0.0), attempt("b1", 3, "No?", 0.0)])
    loaded = load_experiment(exp)
    rows = {r.item_id: r for r in attack_rows(loaded)}
    assert set(rows) == {"b0", "b1"} and {r.eval_name for r in rows.values()} == {ATTACK}
    assert rows["b0"].prompt == ask["b0"] and set(rows["b0"].answers) == {"bct", "opct"}
    unscored, cracked = rows["b0"].answers["bct"], rows["b0"].answers["opct"]
    assert unscored.outcome == "unscored" and "wrapped b0 #2" in unscored.response and "3 3 3 3" in unscored.response
    assert "unscored_attempts=1" in unscored.scores
    assert cracked.outcome == "cracked" and "Sure, <b>step one</b>" in cracked.response and "cracked_at=2" in cracked.scores
    assert "Hmm, no." in rows["b1"].answers["bct"].response  # the best-scoring attempt of a defended behaviour
    assert rows["b1"].answers["opct"].outcome == "defended"

    write_report(exp)
    page = (exp / "samples.html").read_text(encoding="utf-8")
    assert page.count(f'data-e="{ATTACK}"') == 2 and "<b>step one</b>" not in page  # escaped
    links = cell_links(loaded, build_table(loaded))
    assert links[("opct", "dsr_adaptive")] == samples_href(ATTACK, "opct")
    assert ("base", "dsr_adaptive") not in links  # the base model was not attacked here
    assert samples_href(ATTACK, "bct").replace("&", "&amp;") in (exp / "report.html").read_text(encoding="utf-8")


#: Appended to a copy of samples.html: after the URL's filters ran, record what shows, then type into the
#: search field as a user would and record again.
SEARCH_PROBE = (
    '<script>(() => { const state = () => [document.getElementById("shown").textContent, location.hash,'
    ' [...document.querySelectorAll("#samples tbody tr:not([hidden])")].map(tr => tr.dataset.i)];'
    ' const before = state(), q = document.getElementById("f-q"); q.value = "BASE answers q3/clean";'
    ' q.dispatchEvent(new Event("input")); const p = document.createElement("pre"); p.id = "probe";'
    ' p.textContent = JSON.stringify([before, state()]); document.body.appendChild(p); })();</script>'
)


def _probe(browser: str, profile: Path, exp_dir: Path, fragment: str) -> tuple[list, list]:
    probe = exp_dir / "search-probe.html"  # beside samples.html; removed below
    probe.write_text((exp_dir / "samples.html").read_text(encoding="utf-8").replace("</body>", SEARCH_PROBE + "</body>"))
    try:
        run = run_browser(browser, profile, "--dump-dom", probe.as_uri() + fragment)
    finally:
        probe.unlink()
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="probe">([^<]*)</pre>', run.stdout)
    assert found, "probe did not run"
    before, after = json.loads(unescape(found.group(1)))
    return before, after


def test_search_and_item_id_filter_rows_and_live_in_the_url_in_headless_chromium(exp_dir: Path, tmp_path: Path) -> None:
    browser = find_browser()
    if browser is None:
        pytest.skip(NO_BROWSER)
    page = (exp_dir / "samples.html").read_text(encoding="utf-8")
    assert 'id="f-item"' in page and 'id="f-q"' in page and '<option value="j2">' in page  # the ids are suggested

    rows, count = _dump(browser, tmp_path / "p1", (exp_dir / "samples.html").as_uri() + "#item=q1")
    shown = [r for r in rows if not r[2]]
    assert count == f"2 of {TOTAL}" and {r[0] for r in shown} == {"sycophancy"}  # q1: its clean and biased prompt

    # the fragment's search and item id, then a search typed into the field: every word, any case
    before, after = _probe(browser, tmp_path / "p2", exp_dir, "#q=j2")
    assert before == ["1", "#q=j2", ["j2"]]
    assert after == ["1", "#q=BASE+answers+q3%2Fclean", ["q3"]]
    before, _ = _probe(browser, tmp_path / "p3", exp_dir, "#method=opct&q=j2")  # OPCT never answered j2
    assert before[0] == "0" and before[2] == []
    before, _ = _probe(browser, tmp_path / "p4", exp_dir, "#item=q&q=q")  # an item id is matched exactly
    assert before[0] == "0"
