"""``opct data``: the pinned benchmark copies: list them, fetch them, verify local copies (docs/data.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from opct.cli.boundary import _fail, console
from opct.datasets.catalog import PINNED
from opct.datasets.fetch import fetch, verify
from opct.runs.outputs import claim_output

data_app = typer.Typer(no_args_is_help=True,
                       help="Benchmark data: list the pinned copies, fetch them, verify local copies by hash.")

Names = Annotated[list[str] | None, typer.Argument(
    metavar="NAME...", help="Pinned data sets (math-500, gpqa-diamond, ifeval, sageeval-test); default: all.",
    show_default=False)]


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def _checks_table(title: str, checks: list) -> Table:
    table = Table(title=title)
    for col in ("name", "status", "rows", "path", "detail"):
        table.add_column(col)
    for c in checks:
        colour = "green" if c.ok else "yellow" if c.status == "absent" else "red"
        table.add_row(c.name, f"[{colour}]{c.status}[/]", "" if c.rows is None else str(c.rows), escape(c.path or ""),
                      escape(c.detail))
    return table


@data_app.command("list")
def data_list() -> None:
    """The pinned data sets: what each is, which eval reads it, where it comes from, its licence."""
    table = Table(title="pinned benchmark copies (opct data fetch NAME --to DIR)")
    for col in ("name", "eval.real key", "rows", "size", "upstream (hub)", "licence"):
        table.add_column(col)
    for d in PINNED.values():
        upstream = d.upstream_id + ("" if d.upstream_revision else " (revision not recorded)")
        table.add_row(d.name, d.eval_key, str(d.rows), _size(d.size), upstream, d.licence.split(" (")[0])
    console.print(table)
    first = next(iter(PINNED.values()))
    console.print(f"files: github.com/{first.repo} at commit {first.commit}, folder datasets/<name>/", highlight=False)


@data_app.command("fetch")
def data_fetch(
    names: Names = None,
    to: Annotated[Path, typer.Option("--to", metavar="DIR", help="Where to write <name>/ folders (the layout of --data-dir; "
                                     "the shipped configs read data/benchmarks).")] = Path("data/benchmarks"),
    source: Annotated[str, typer.Option("--from", metavar="SOURCE", help="github: the OPCT authors' files at the pinned "
                                        "commit (all data sets); hub: the pinned Hugging Face revision (ifeval only).")] = "github",
    timeout: Annotated[float, typer.Option(metavar="SECONDS", min=0.1, help="Give up when the host does not answer within this.")] = 10.0,
    force: Annotated[bool, typer.Option("--force", help="Replace a copy in DIR that does not verify.")] = False,
) -> None:
    """Download the pinned benchmark copies into DIR and check them by sha256 (fails fast without network)."""
    checks = fetch(names or [], to, source=source, timeout=timeout, force=force,
                   claim=lambda path, is_own: claim_output(path, "--to", is_own, "an earlier opct data fetch copy"))
    console.print(_checks_table(escape(f"fetched into {to}"), checks))
    console.print(f"evaluate on them with: opct eval --data real --data-dir {to}", highlight=False, markup=False)


@data_app.command("verify")
def data_verify(
    root: Annotated[Path, typer.Argument(metavar="DIR", help="A folder holding <name>/ folders (or <name>.parquet / .jsonl).")],
    names: Names = None,
) -> None:
    """Re-hash local copies against the pinned hashes (offline); exit 1 if one differs or a named one is absent."""
    checks = verify(root, names or [])
    console.print(_checks_table(escape(f"copies in {root}"), checks))
    bad = [c.name for c in checks if c.status in ("differs", "unreadable") or (names and c.status == "absent")]
    if bad:
        _fail(f"{', '.join(bad)} in {root}: do not verify or are absent (see the table above and docs/data.md)", code=1)
    if not any(c.ok for c in checks):
        _fail(f"no pinned data set found in {root}: fetch them with `opct data fetch --to {root}`", code=1)
