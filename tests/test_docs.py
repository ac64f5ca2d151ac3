"""The documentation: the site builds with ``mkdocs build --strict``, every shell command it shows is run
by a test or marked with why it is not (docs/development.md, "Every shell command in the docs is run or
marked"), every command it shows or quotes names only commands, options, targets, scripts and files that exist
(``tests/docs_commands.py``), the generated reference pages cover every command and every settings key, and
the README stays a short front page whose test command is the one CI runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO
from docs_commands import DOCS_BUILD, REPO_PATH, StaleCommand, check_command, check_inline
from script_loader import load_script
from typer.testing import CliRunner

DOCS = REPO / "docs"
#: Every page with commands: the front page, the library's docs and the lab's (lab/docs/, once it has pages).
PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md")), *sorted((REPO / "lab" / "docs").rglob("*.md"))]
#: How a block marked "runs: dry-run in tests" is run: the command with its dry-run flag.
DRY_RUN_FLAG = {"run": "--dry-run", "demo": "--dry-run", "demo-full": "--dry-run", "select": "--dry-run",
                "train": "--print-config"}
MARKER = re.compile(
    r"^<!-- (?P<kind>runs: tests/test_docs\.py|runs: dry-run in tests|runs: long|walkthrough:start"
    r"|needs: (?:gpu|network)(?:, (?:gpu|network))?)(?: \([^)]*\))? -->$"
)
#: The fences whose every line is a command; a ``text`` block's ``$ `` lines are commands with their output.
SHELL_FENCES = ("```bash", "```sh", "```shell", "```console")
#: The kinds a test runs (the rest are marked: not run, each with why; their commands are still checked).
RUN_KINDS = ("runs: tests/test_docs.py", "runs: dry-run in tests", "walkthrough:start", "shown")


@dataclass
class Block:
    """One fenced shell block of a page: where it is, its marker's kind (None: unmarked; ``shown``: a ``text``
    block's ``$ `` commands, with the output below each), its commands."""

    page: Path
    line: int
    kind: str | None
    commands: list[str]

    @property
    def where(self) -> str:
        return f"{page_name(self.page)}:{self.line}"


def page_name(page: Path) -> str:
    """A page as the tests name it: from the repository root (a test's own page: its file name)."""
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else page.name


def commands_of(lines: list[str]) -> list[str]:
    """The commands of a block: continuation lines joined, comment lines and trailing comments dropped."""
    joined, current = [], ""
    for raw in lines:
        line = raw.strip()
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip() and not current.lstrip().startswith("#"):
            joined.append(shlex.join(shlex.split(current, comments=True)) if "$(" not in current else current.strip())
        current = ""
    return joined


def bash_blocks(page: Path) -> list[Block]:
    """Every fenced shell block of ``page``, with the marker on the nearest non-blank line before it, and every
    ``text`` block that shows commands (``$ opct ...``) with their output."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = lines[i].strip()
        if not fence.startswith("```"):
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        body = lines[i + 1:end]
        if fence in SHELL_FENCES:
            before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            match = MARKER.match(before)
            blocks.append(Block(page, i + 1, match["kind"] if match else None, commands_of(body)))
        elif any(line.startswith("$ ") for line in body):
            blocks.append(Block(page, i + 1, "shown", [line[2:].strip() for line in body if line.startswith("$ ")]))
        i = end + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in bash_blocks(page)]


def _generated():
    """docs/hooks/generated.py, the mkdocs hook that writes the reference pages."""
    return load_script("docs/hooks/generated.py")


@pytest.fixture
def work(tmp_path, monkeypatch):
    """An empty folder with the repository's ``configs/`` and ``opct/experiments/`` linked in: the
    commands' relative paths resolve, and anything they wrote would land here."""
    (tmp_path / "configs").symlink_to(REPO / "configs")
    (tmp_path / "opct").mkdir()
    (tmp_path / "opct" / "experiments").symlink_to(REPO / "opct" / "experiments")
    (tmp_path / "lab" / "opct_lab").mkdir(parents=True)  # the lab's study files (opct-lab commands)
    (tmp_path / "lab" / "opct_lab" / "studies").symlink_to(REPO / "lab" / "opct_lab" / "studies")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _opct(command: str) -> None:
    from opct.cli.main import app
    from opct_lab.cli import app as lab_app

    args = shlex.split(command)
    assert args[0] in ("opct", "opct-lab"), f"{command!r}: the tests run opct and opct-lab commands only; mark the block instead"
    result = CliRunner().invoke(app if args[0] == "opct" else lab_app, args[1:], prog_name=args[0])
    assert result.exit_code == 0, f"{command}\n{result.output}\n{result.exception!r}"


def test_every_bash_block_is_run_or_marked():
    blocks = all_blocks()
    unmarked = [b.where for b in blocks if b.kind is None]
    assert not unmarked, (
        "a bash block without a marker (see docs/development.md, 'Every shell command in the docs is run "
        f"or marked'): {unmarked}"
    )
    kinds = {b.kind for b in blocks}
    assert {"runs: tests/test_docs.py", "runs: dry-run in tests", "walkthrough:start"} <= kinds
    assert all(b.commands for b in blocks), [b.where for b in blocks if not b.commands]


#: A command quoted in running text: `opct ...` or `opct-lab ...` in backticks.
INLINE = re.compile(r"`(opct(?:-lab)? [^`]+)`")
#: What a marked block may hold that the tests neither run nor parse: programs outside opct (docs_commands.OUTSIDE).
MARKED_KINDS = ("runs: long", "needs: gpu", "needs: network", "needs: gpu, network")


def command_problems(blocks: list[Block]) -> list[str]:
    """What is wrong with the commands of ``blocks``: an unmarked block, a command that names a command, option,
    target, script or file that does not exist (each checked by ``docs_commands.check_command``, in a marked
    block too), and a program outside opct in a block a test runs."""
    problems = [f"{b.where}: a block without a marker" for b in blocks if b.kind is None]
    for block in blocks:
        for command in block.commands:
            try:
                how = check_command(command)
            except StaleCommand as stale:
                problems.append(f"{block.where}: {stale}")
                continue
            if how == "outside" and block.kind not in MARKED_KINDS and block.kind != "walkthrough:start":
                problems.append(f"{block.where}: {command!r} is not opct's: a test cannot run it; mark the block")
    return problems


def inline_problems(pages: list[Path]) -> list[str]:
    """Each repository file a page names that does not exist, and each `opct ...` quoted in its running text
    (outside its fenced blocks) whose subcommands or options do not exist (``docs_commands.check_inline``)."""
    problems = []
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            problems += [f"{page_name(page)}:{number}: names {path}, which the repository does not have"
                         for path in REPO_PATH.findall(line) if not (REPO / path).exists()]
        text = re.sub(r"^\s*```.*?^\s*```", lambda m: "\n" * m[0].count("\n"), page.read_text(encoding="utf-8"),
                      flags=re.DOTALL | re.MULTILINE)
        for number, line in enumerate(text.splitlines(), 1):
            for quoted in INLINE.findall(line):
                try:
                    check_inline(quoted)
                except StaleCommand as stale:
                    problems.append(f"{page_name(page)}:{number}: {stale}")
    return problems


def coverage(blocks: list[Block]) -> dict[str, Counter]:
    """Per page, how many commands a test runs (``run``) and how many are marked (``marked``: not run, each
    block saying why; an opct command among them is still parsed) and ``unmarked``."""
    pages: dict[str, Counter] = {}
    for block in blocks:
        counts = pages.setdefault(page_name(block.page), Counter())
        kind = "unmarked" if block.kind is None else "run" if block.kind in RUN_KINDS else "marked"
        counts[kind] += len(block.commands)
    return pages


def test_every_documented_command_names_what_exists():
    """Every command of every block, marked ones included, parses with the real CLI (or names a Makefile
    target, a script and its options, an Inspect task of opct's); ``opct demo --rule`` or a study file that
    moved fails here, though no test runs the command."""
    blocks = all_blocks()
    assert command_problems(blocks) == []
    counts = coverage(blocks)
    assert sum(c["run"] for c in counts.values()) >= 40 and sum(c["marked"] for c in counts.values()) >= 60


def test_every_command_quoted_in_the_text_names_real_commands_and_options():
    assert inline_problems(PAGES) == []


def test_the_checks_find_stale_commands(tmp_path):
    """Each check sees the thing it forbids: an unmarked block, an option or command the CLI does not have (in a
    marked block too), a missing argument or a refused value, a Makefile target, a script or a script's option
    that does not exist, a study file that moved, a task Inspect does not have, a program the tests do not know,
    and a program outside opct in a block a test runs; and a quoted command with an unknown option."""
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "```bash", "opct demo --dry-run", "```",
        "<!-- runs: long -->", "```bash",
        "opct demo --rule good_behaviour", "opct-lab demo-full --full", "opct frobnicate", "opct export",
        "opct train --gpus many", "make no-such-target", "python benchmarks/no_such_script.py",
        "PYTHONPATH=. python benchmarks/threads.py --no-such-option", "opct-lab run opct/experiments/organism_mechanism.yaml",
        "inspect eval opct/no_such_axis --model opct/organism", "inspect eval opct/sycophancy -T no_such_arg=1",
        "frobnicate --now", "```",
        "<!-- runs: dry-run in tests -->", "```bash", "pip install opct", "```",
        "<!-- needs: network -->", "```bash", "pip install opct", "opct-lab demo --rule good_behaviour",
        "PYTHONPATH=. python benchmarks/threads.py --threads 1,2", "make demo", "```",
        "Quoted: `opct demo --full` and `opct-lab demo --reselect`, `opct <command> --help`, `opct nosuch`,",
        "`opct-lab run lab/opct_lab/studies/organism_mechanism.yaml`, `opct run opct/experiments/organism_mechanism.yaml`.",
    ]) + "\n", encoding="utf-8")
    problems = command_problems(bash_blocks(page))
    expected = ["page.md:1: a block without a marker", "No such option: --rule", "No such option: --full",
                "No such command 'frobnicate'", "Missing argument 'RUN'", "Invalid value for '--gpus'",
                "no target ['no-such-target']", "names benchmarks/no_such_script.py", "declares no option --no-such-option",
                "names opct/experiments/organism_mechanism.yaml", "no such task", "no argument 'no_such_arg'",
                "frobnicate is neither opct's", "'pip install opct' is not opct's"]
    assert len(problems) == len(expected), problems
    for problem, words in zip(problems, expected, strict=True):
        assert words in problem, (words, problem)
    quoted = inline_problems([page])
    assert [problem.split(", which")[0].split(" (it has")[0] for problem in quoted] == [
        "page.md:12: names benchmarks/no_such_script.py", "page.md:14: names opct/experiments/organism_mechanism.yaml",
        "page.md:31: names opct/experiments/organism_mechanism.yaml",  # a file named in a block, and in the text
        "page.md:30: `opct demo --full`: opct demo has no option --full", "page.md:30: `opct nosuch`: opct has no command 'nosuch'"]
    assert coverage(bash_blocks(page)) == {"page.md": Counter(run=1, marked=16, unmarked=1)}


def test_shown_commands_print_what_the_page_shows(work):
    """A ``text`` block's ``$ opct ...`` runs, and prints the lines the page shows below it."""
    shown = [b for b in all_blocks() if b.kind == "shown"]
    assert shown
    from opct.cli.main import app
    from opct_lab.cli import app as lab_app

    for block in shown:
        lines = block.page.read_text(encoding="utf-8").splitlines()[block.line:]
        body = lines[:lines.index("```")]
        for command in block.commands:
            at = body.index(f"$ {command}")
            following = [k for k in range(at + 1, len(body)) if body[k].startswith("$ ")]
            output = " ".join(body[at + 1:following[0] if following else len(body)])
            assert output.strip(), f"{block.where}: {command!r} shows no output"
            args = shlex.split(command)
            result = CliRunner().invoke(app if args[0] == "opct" else lab_app, args[1:], prog_name=args[0])
            assert " ".join(output.split()) in " ".join(result.output.split()), f"{block.where}: {command}\n{result.output}"


@pytest.fixture
def no_hub(work, monkeypatch):
    """The hub not asked to be offline (no ``HF_HUB_OFFLINE``) and not reachable (a refused loopback port), and
    no embedded model converted: the documented cheap commands and dry runs need no network and download nothing."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OPCT_MODELS", str(work.parent / "no-models"))


def test_cheap_commands_run(work, no_hub):
    blocks = [b for b in all_blocks() if b.kind == "runs: tests/test_docs.py"]
    ran = 0
    for block in blocks:
        for command in block.commands:
            if command.startswith("mkdocs"):
                assert command == DOCS_BUILD, f"{block.where}: {command!r} (test_site_builds_with_strict runs {DOCS_BUILD!r})"
                continue
            _opct(command)
            ran += 1
    assert ran >= 4
    assert sorted(p.name for p in work.iterdir()) == ["configs", "lab", "opct"], "a documented cheap command wrote files"


def test_dry_run_commands_run(work, no_hub):
    blocks = [b for b in all_blocks() if b.kind == "runs: dry-run in tests"]
    commands = [(b.where, c) for b in blocks for c in b.commands]
    assert len(commands) >= 8
    for where, command in commands:
        verb = shlex.split(command)[1]
        assert verb in DRY_RUN_FLAG, f"{where}: {command!r} has no dry run; mark the block long instead"
        _opct(f"{command} {DRY_RUN_FLAG[verb]}")
    assert sorted(p.name for p in work.iterdir()) == ["configs", "lab", "opct"], "a dry run wrote files"


def test_walkthrough_is_one_block_on_the_real_models_page():
    from test_readme_walkthrough import WALKTHROUGH_PAGE, walkthrough_commands

    holders = [p for p in PAGES if "<!-- walkthrough:start -->" in p.read_text(encoding="utf-8").splitlines()]
    assert holders == [DOCS / "real-models.md"] == [WALKTHROUGH_PAGE]
    blocks = [b for b in bash_blocks(WALKTHROUGH_PAGE) if b.kind == "walkthrough:start"]
    assert len(blocks) == 1 and len(blocks[0].commands) == len(walkthrough_commands()) >= 5
    assert any(c.startswith("opct run") for c in walkthrough_commands())


def test_readme_is_a_front_page_and_its_test_command_is_cis():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert "<!-- results:full-study -->" in readme
    quick_start = bash_blocks(REPO / "README.md")[0]
    assert "make test" in quick_start.commands and "make demo" in quick_start.commands
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == "make test"
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert [link for link in local if not (REPO / link).exists()] == []
    linked = {(REPO / link).resolve() for link in local}
    included = {DOCS / "architecture.md": REPO / "ARCHITECTURE.md"}  # a page that includes a root file
    for page in DOCS.glob("*.md"):
        target = included.get(page, page)
        assert target.resolve() in linked, f"README links no {target.relative_to(REPO)}"


def test_cli_reference_covers_every_command():
    generated = _generated()
    paths = generated.command_paths()
    assert ["pairs", "validate"] in paths and ["demo"] in paths and [] in paths
    text = generated.cli_reference_markdown()
    for path in paths:
        assert f"Usage: {' '.join(['opct', *path])} " in text, path


def test_config_reference_lists_every_key_with_the_sections_own_defaults():
    from opct.config import RunConfig
    from opct.experiments.runner import ExperimentConfig

    generated = _generated()
    text = generated.config_reference_markdown()

    def keys(model, prefix=""):
        for name, field in model.model_fields.items():
            yield prefix + name
            for suffix, sub in generated.model_types(field.annotation):
                yield from keys(sub, f"{prefix}{name}{suffix}.")

    for key in [*keys(RunConfig), *keys(ExperimentConfig)]:
        assert f"| {generated.key_cell(key)} |" in text, key
    # OPCT's rollouts default to temperature 1 and 3 samples (RolloutSettings), not GenerationConfig's greedy 1
    cell = generated.key_cell
    assert f"| {cell('opct.sampling.temperature')} | float (≥ 0.0, ≤ 10.0) | 1.0 |" in text
    assert f"| {cell('opct.sampling.n')} | int (> 0) | 3 |" in text
    assert f"| {cell('eval.generation.max_new_tokens')} | int (> 0) | 64 |" in text


def test_every_config_key_has_a_description():
    """101 of 233 keys had none (opct.loss.kind, lora.r, train.trackers...); a key added without one fails here."""
    generated = _generated()
    assert generated.undocumented_keys() == []
    text = generated.config_reference_markdown()
    rows = [line for line in text.splitlines() if line.startswith('| <code class="opct-key">')]
    assert len(rows) >= 200 and all(not line.rstrip().endswith("|  |") for line in rows)
    assert generated.key_cell("variants.<name>.method") == '<code class="opct-key">variants.<wbr>&lt;name&gt;.<wbr>method</code>'


def test_undocumented_key_is_found():
    """The check reads every model of the reference, nested ones included."""
    from pydantic import BaseModel, Field

    generated = _generated()

    class Inner(BaseModel):
        said: int = Field(1, description="described")
        unsaid: int = 2

    class Outer(BaseModel):
        inner: Inner = Field(default_factory=Inner, description="a section")

    real = generated.settings_models
    try:
        generated.settings_models = lambda: [("run", Outer, "")]
        assert generated.undocumented_keys() == [f"inner.unsaid ({Inner.__module__}.{Inner.__qualname__.split('.')[-1]})"]
    finally:
        generated.settings_models = real


#: Measures, in a real browser, where each settings key of the config page wraps: the keys that break
#: other than after a dot, and how many wrap at all.
_KEY_WRAP_PROBE = """<script>
const bad = [], wrapped = [];
for (const el of document.querySelectorAll('code.opct-key')) {
  const range = document.createRange(), walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  let top = null, before = '', node;
  while ((node = walker.nextNode())) {
    for (let i = 0; i < node.length; i++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect || !node.data[i].trim()) continue;
      if (top !== null && rect.top > top + 2) { wrapped.push(el.textContent); if (before !== '.') bad.push(el.textContent); }
      top = rect.top; before = node.data[i];
    }
  }
}
document.body.setAttribute('data-bad', JSON.stringify(bad));
document.body.setAttribute('data-wrapped', String(wrapped.length));
</script>"""


def test_site_builds_with_strict(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", *shlex.split(DOCS_BUILD), "--site-dir", str(site)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert "Usage: opct pairs validate" in cli and "Usage: opct organism build" in cli
    config = (site / "config" / "index.html").read_text(encoding="utf-8")
    assert "train.<wbr>pairs_per_step" in config and "variants.<wbr>&lt;name&gt;.<wbr>method" in config
    _keys_break_only_after_dots(tmp_path, site / "config" / "index.html", config)
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert "opct.config.load_config" in api and "pooled_paired_difference" in api
    assert "Where is X" in (site / "architecture" / "index.html").read_text(encoding="utf-8")


def _keys_break_only_after_dots(tmp_path: Path, page: Path, html: str) -> None:
    """On a narrow window, keys wrap (some do), and only after a dot, never inside a word."""
    import json

    from browser import NO_BROWSER, find_browser, run_browser

    browser = find_browser()
    if browser is None:
        pytest.skip(NO_BROWSER)
    probe = page.with_name("probe.html")
    probe.write_text(html.replace("</body>", _KEY_WRAP_PROBE + "</body>"), encoding="utf-8")
    run = run_browser(browser, tmp_path / "profile", "--window-size=700,900", "--dump-dom", probe.as_uri())
    bad = re.search(r'data-bad="([^"]*)"', run.stdout)
    wrapped = re.search(r'data-wrapped="(\d+)"', run.stdout)
    assert bad and wrapped, run.stderr[-2000:]
    assert int(wrapped.group(1)) > 0  # the window is narrow enough that keys wrap
    assert json.loads(bad.group(1).replace("&quot;", '"')) == []
