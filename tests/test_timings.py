"""Every wall time the README and docs/ state for the demo and the studies comes from one committed source,
``benchmarks/results/timings.json``, rendered by ``benchmarks/timings.py``: the pages show what the file says,
each measurement carries its provenance, and the front pages state no time outside a marker."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import REPO
from script_loader import load_script

#: A wall time as the docs write one (``5 min 50 s``, ``68 min 40 s``, ``2 h 8 min``).
A_TIME = re.compile(r"\b\d+ min \d+ s\b|\b\d+ h \d+ min\b")


def _script():
    return load_script("benchmarks/timings.py")


def test_the_docs_show_what_timings_json_says() -> None:
    script = _script()
    assert script.main(["--check"]) == 0
    timings = script.load_timings()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for key in ("quick-demo", "demo-full", "demo-full-compare-rules", "mechanism-study"):
        assert f"<!-- time:{key} -->{script.phrase(timings[key])}<!-- /time -->" in readme
    development = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    assert script.table(timings) in development  # every measurement listed with its source
    assert all(f"| `{key}` |" in development for key in timings)


def test_every_measurement_says_where_it_comes_from() -> None:
    timings = _script().load_timings()
    assert {"quick-demo", "demo-full", "demo-full-compare-rules"} <= set(timings)
    for key, entry in timings.items():
        assert entry["wall_s"] > 0 and entry["command"] and entry["source"], key
        assert {"commit", "date", "cores", "cpu_s"} <= set(entry), f"{key}: say null where it was not recorded"
        assert entry["commit"] is None or re.fullmatch(r"[0-9a-f]{7}", entry["commit"]), key


def test_the_front_pages_state_no_time_outside_a_marker() -> None:
    script = _script()
    for page in (REPO / "README.md", REPO / "docs" / "index.md"):
        text = script.MARKER.sub("", page.read_text(encoding="utf-8"))
        assert A_TIME.findall(text) == [], f"{page.name}: a time not from benchmarks/results/timings.json"


def test_a_changed_measurement_makes_the_pages_stale_and_the_script_rewrites_them(tmp_path: Path) -> None:
    script = _script()
    page = tmp_path / "page.md"
    page.write_text("The demo: <!-- time:quick-demo -->old text<!-- /time -->.\n", encoding="utf-8")
    timings = json.loads(script.SOURCE.read_text(encoding="utf-8"))["timings"]
    assert script.stale_pages(timings, [page]) == [page]
    timings["quick-demo"] = {**timings["quick-demo"], "wall_s": 281, "commit": "abcdef0", "cores": 4}
    rendered = script.render(page.read_text(encoding="utf-8"), timings)
    assert "4 min 41 s wall (`make demo` (opct demo --jobs auto: 2 jobs of one thread), 4 quiet cores" in rendered and "at abcdef0" in rendered
    page.write_text(rendered, encoding="utf-8")
    assert script.stale_pages(timings, [page]) == []
    with pytest.raises(ValueError, match="names no measurement"):
        script.render("<!-- time:no-such-run -->x<!-- /time -->", timings)


@pytest.mark.parametrize(("seconds", "text"), [(45, "45 s"), (350, "5 min 50 s"), (4120, "68 min 40 s"),
                                               (7659, "2 h 8 min"), (9541, "2 h 39 min")])
def test_durations_read_as_the_docs_write_them(seconds: float, text: str) -> None:
    assert _script().duration(seconds) == text
