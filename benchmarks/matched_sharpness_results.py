"""The matched-sharpness study's published numbers, generated from its committed analysis.

The pre-registered analysis (``benchmarks/matched_sharpness_analysis.py``) writes its estimates as JSON; the
committed copy is ``benchmarks/results/matched_sharpness/analysis.json``, beside each study file's timing log
(``<file>.time.txt``). This script writes two blocks from them:

* in ``README.md``, between ``<!-- results:matched-sharpness:start -->`` and ``<!-- results:matched-sharpness:end -->``:
  the reading at each τ, with the primary interaction and each level's difference on both primary metrics;
* in ``docs/matched_sharpness.md``, between ``<!-- results:matched-sharpness-analysis:start -->`` and
  ``<!-- results:matched-sharpness-analysis:end -->``: the wall time of each study file and the whole analysis,
  as the script prints it (headings moved under the results section).

::

    python benchmarks/matched_sharpness_results.py          # rewrites both blocks
    python benchmarks/matched_sharpness_results.py --check  # exit 1 when a page does not show what the files say

``lab/tests/test_lab_matched_sharpness_results.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGE = ROOT / "docs" / "matched_sharpness.md"
RESULTS = ROOT / "benchmarks" / "results" / "matched_sharpness"
ANALYSIS = RESULTS / "analysis.json"
#: The study files in the order they ran, each with its timing log ``<stem>.time.txt`` in :data:`RESULTS`.
STUDY_FILES = ("organism_matched_sharpness", "organism_matched_sharpness_t05")
README_BLOCK = ("<!-- results:matched-sharpness:start -->", "<!-- results:matched-sharpness:end -->")
PAGE_BLOCK = ("<!-- results:matched-sharpness-analysis:start -->", "<!-- results:matched-sharpness-analysis:end -->")
#: The primary metrics' names in prose, in the pre-registration's order.
PRIMARY = {"dsr_adaptive": "held-out adaptive defense", "awareness": "held-out awareness AUSC"}
#: The metric of greedy-target BCT's secondary rows in the README (the paper's headline safety claim).
KEY = "dsr_adaptive"
#: The greedy-target BCT reference arm of the study files.
REFERENCE = "bct"
NOT_RESOLVED = "not resolved"
WALL = re.compile(r"^wall_seconds (\d+(?:\.\d+)?)$", re.MULTILINE)


def number(x: float | None, percent: bool) -> str:
    """A difference, signed, as the study report writes it: a rate's in points, a score's (AUSC) to 3 decimals."""
    if x is None:
        return "—"
    return f"{100 * x:+.1f} pts" if percent else f"{x:+.3f}"


def interval(ci: Sequence[float | None] | None, percent: bool) -> str:
    """An interval as :func:`number` writes its ends, ``[a, b]`` (``[—]`` when either end is missing)."""
    if not ci or ci[0] is None or ci[1] is None:
        return "[—]"
    return f"[{number(ci[0], percent).removesuffix(' pts')}, {number(ci[1], percent).removesuffix(' pts')}]"


def wall_time(stem: str, results: Path = RESULTS) -> str:
    """One study file's measured wall time from its timing log, as ``H h M min`` (``no timing log`` without one)."""
    path = results / f"{stem}.time.txt"
    if not path.exists():
        return "no timing log (not run, or not finished)"
    found = WALL.findall(path.read_text(encoding="utf-8"))
    if not found:
        raise SystemExit(f"{path}: no 'wall_seconds N' line; the timing log must end with the measured wall time")
    seconds = round(float(found[-1]))
    return f"{seconds // 3600} h {seconds % 3600 // 60} min ({seconds:,} s)"


def is_percent(part: Mapping[str, Any], key: str) -> bool:
    """Whether ``key`` is a rate (written in points) in this τ's level rows."""
    return any((level["D"].get(key) or {}).get("percent") for level in part["levels"].values())


def _d(part: Mapping[str, Any], level: str, key: str) -> str:
    """A level's D as the study report writes it (its rounding and its INCOMPLETE mark)."""
    rec = part["levels"][level]["D"].get(key) or {}
    text = _text(rec) if rec.get("text", {}).get("difference") else _measured(part, rec, key)
    return text + (" INCOMPLETE" if rec.get("incomplete") and "INCOMPLETE" not in text else "")


def _text(rec: Mapping[str, Any] | None) -> str:
    """A secondary row's difference as the study report writes it (``—`` when it has none)."""
    return " ".join(rec["text"]["difference"]) if rec and rec.get("text") else "—"


def _secondary(part: Mapping[str, Any], rec: Mapping[str, Any] | None, key: str) -> str:
    """A secondary row: as the study report writes it where the row has its text (pairs within one folder), else
    its value and interval (pairs across folders, τ = 0.5's ``bct`` reference), in the level rows' unit."""
    return _text(rec) if not rec or rec.get("text") else _measured(part, rec, key)


def _measured(part: Mapping[str, Any], rec: Mapping[str, Any], key: str) -> str:
    """A difference with no report text, as its value and interval in the level rows' unit (points or a score)."""
    percent = is_percent(part, key)
    return f"{number(rec.get('value'), percent)} {interval([rec.get('ci_low'), rec.get('ci_high')], percent)}"


def reading_words(part: Mapping[str, Any]) -> str:
    """``the reading is not resolved by the text's rule (the code as run read "…")``: the reading under the
    pre-registered text's rule as written (bold unless it is not resolved) and, where it differs, the one the
    code as run made (amended 2026-12-07, issue 71; docs/matched_sharpness.md)."""
    as_run = part["reading"]["outcome"]
    written = (part.get("reading_as_written") or part["reading"])["outcome"]
    shown = written if written == NOT_RESOLVED else f"**{written}**"
    if written == as_run:
        return f"the reading is {shown}"
    return (f"the reading is {shown} by the pre-registered text's rule as written (the code as run read "
            f"\"{as_run}\": amended 2026-12-07, [both](docs/matched_sharpness.md#amendment-2026-12-07-issue-71-the-reading-rule-as-written))")


def tau_sentence(part: Mapping[str, Any], scope: str) -> str:
    """One τ's reading, its interactions and each level's difference, in one Markdown sentence."""
    opct, sampled = part["arms"]
    l1, l3 = list(part["levels"])
    terms = []
    for key, name in PRIMARY.items():
        i, percent = part["interaction"][key], is_percent(part, key)
        terms.append(f"{name} I = **{number(i['value'], percent)}** 95% {interval(i['ci95'], percent)}, "
                     f"97.5% {interval(i['ci975'], percent)} "
                     f"(D at L1, {l1}, {_d(part, l1, key)}; at L3, {l3}, {_d(part, l3, key)})")
    collapsed = part["reading"].get("collapsed") or []
    warned = f"; collapse warnings: {', '.join(collapsed)}" if collapsed else "; no OPCT run drew the collapse warning"
    greedy = []
    for pair in (f"{REFERENCE} − {sampled}", f"{REFERENCE} − {opct}"):
        rows = part.get(pair) or {}
        greedy.append(f"`{pair}` " + ", ".join(f"{level} {_secondary(part, rows[level].get(KEY), KEY)}" for level in rows))
    return (f"at τ = {part['tau']} ({scope}), `{opct}` − `{sampled}`, {reading_words(part)}: "
            + "; ".join(terms) + warned + ". Greedy-target BCT on held-out adaptive defense (secondary): "
            + "; ".join(greedy))


def readme_block(data: Mapping[str, Any], seeds: int) -> str:
    """The README's lines: the reading at τ = 1.0 and, when it ran, at τ = 0.5; ``seeds``: training seeds per arm."""
    lines = [f"<!-- generated by benchmarks/matched_sharpness_results.py from {ANALYSIS.relative_to(ROOT).as_posix()}; "
             "do not edit by hand -->",
             "The [pre-registered matched-sharpness study](docs/matched_sharpness.md#results) trains BCT on 3 targets "
             "sampled from the teacher at τ and OPCT against the teacher at τ, on the same pairs with one fixed recipe "
             f"per method, at L1 and L3, {seeds} training seeds. I is OPCT − BCT-sampled at L3 minus the same at L1 "
             f"({data['resamples']:,} resamples): "
             + tau_sentence(data["tau_1.0"], "llama and qwen3") + "."]
    if "tau_0.5" in data:
        lines[-1] += " As a second reading, " + tau_sentence(data["tau_0.5"], "qwen3 alone") + "."
    return "\n".join(lines)


def page_block(data: Mapping[str, Any], analysis_md: str, results: Path = RESULTS) -> str:
    """The results section's generated part: each study file's wall time, then the analysis as printed."""
    lines = [f"<!-- generated by benchmarks/matched_sharpness_results.py from {ANALYSIS.relative_to(ROOT).as_posix()}; "
             "do not edit by hand -->", "", "Wall time on 2 cores, `--jobs 2` (timing logs in "
             f"`{results.relative_to(ROOT).as_posix() if results.is_relative_to(ROOT) else results}/`):", ""]
    lines += [f"- `{stem}.yaml`: {wall_time(stem, results)}" for stem in STUDY_FILES]
    body = analysis_md.strip().splitlines()
    if body and body[0].startswith("# "):
        body = body[1:]
    while body and not body[0].strip():
        body = body[1:]
    lines += [""] + [("#" + line) if line.startswith("#") else line for line in body]
    return "\n".join(lines).rstrip()


def training_seeds(data: Mapping[str, Any]) -> int:
    """How many training seeds each arm ran: the τ = 1.0 level rows' planned cells per family."""
    level = next(iter(data["tau_1.0"]["levels"].values()))
    rec = next(iter(level["D"].values()))
    return rec["cells_planned"] // len(level["families"])


def replace_block(text: str, block: tuple[str, str], content: str, page: Path) -> str:
    """``text`` with what lies between the block's markers replaced by ``content``."""
    start, end = block
    if text.count(start) != 1 or text.count(end) != 1:
        raise SystemExit(f"{page}: expected one {start} ... {end} block")
    head, rest = text.split(start)
    _, tail = rest.split(end)
    return f"{head}{start}\n{content}\n{end}{tail}"


def pages(data: Mapping[str, Any], analysis_md: str) -> dict[Path, str]:
    """Each page's text as the committed analysis says it should be."""
    readme = readme_block(data, training_seeds(data))
    return {README: replace_block(README.read_text(encoding="utf-8"), README_BLOCK, readme, README),
            PAGE: replace_block(PAGE.read_text(encoding="utf-8"), PAGE_BLOCK, page_block(data, analysis_md), PAGE)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page differs from what the files say")
    args = parser.parse_args(argv)
    data = json.loads(ANALYSIS.read_text(encoding="utf-8"))
    analysis_md = ANALYSIS.with_suffix(".md").read_text(encoding="utf-8")
    stale = []
    for page, text in pages(data, analysis_md).items():
        if page.read_text(encoding="utf-8") == text:
            continue
        if args.check:
            stale.append(page.relative_to(ROOT).as_posix())
        else:
            page.write_text(text, encoding="utf-8")
            print(f"wrote {page.relative_to(ROOT)}")
    if stale:
        print(f"stale: {', '.join(stale)}; run python benchmarks/matched_sharpness_results.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
