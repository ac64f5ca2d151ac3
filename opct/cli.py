"""The ``opct`` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True, help="On-Policy Consistency Training for Hugging Face causal LMs.")
pairs_app = typer.Typer(no_args_is_help=True, help="Consistency-pair files: validate and summarise.")
app.add_typer(pairs_app, name="pairs")

console = Console()
err_console = Console(stderr=True)


def _fail(message: str, code: int = 2) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@app.command()
def train(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML run configuration.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a setting: key.sub=value (repeatable).")] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="Hide the progress bar.")] = False,
    print_config: Annotated[bool, typer.Option("--print-config", help="Print the resolved configuration and exit.")] = False,
) -> None:
    """Train with OPCT or BCT; rerunning the same command resumes an interrupted run."""
    import yaml

    from opct.config import ConfigError, dump_config, load_config
    from opct.pairs import PairFileError

    try:
        cfg = load_config(config, set_ or [])
    except ConfigError as err:
        _fail(str(err))
    if print_config:
        console.print(yaml.safe_dump(dump_config(cfg), sort_keys=False), highlight=False)
        return
    from opct.train import RunDirError
    from opct.train import train as run_training

    try:
        result = run_training(cfg, show_progress=not no_progress)
    except (PairFileError, RunDirError, ValueError, FileNotFoundError) as err:
        _fail(str(err))
    if result.is_main_process:
        console.print(f"done: {result.steps} steps; checkpoint in [bold]{result.final_dir}[/]")


@pairs_app.command("validate")
def pairs_validate(
    files: Annotated[list[Path], typer.Argument(help="Pair files (JSONL) or dataset folders.")],
    tokenizer: Annotated[str | None, typer.Option(help="Tokenizer (path, hub id or 'organism') for length percentiles.")] = None,
    column: Annotated[list[str] | None, typer.Option(help="Column mapping contract=source, e.g. prompt=question.")] = None,
    split: Annotated[str | None, typer.Option(help="Split of a dataset folder.")] = None,
) -> None:
    """Check pair files; print every problem (file:line: field: message) or a summary."""
    from opct.pairs import PairFileError, read_pairs, summarize_pairs

    columns = dict(c.split("=", 1) for c in column or [])
    tok = None
    if tokenizer:
        from opct.models import load_tokenizer

        tok = load_tokenizer(tokenizer)
    failed = False
    for f in files:
        try:
            pairs = read_pairs(f, columns=columns or None, split=split)
        except PairFileError as err:
            failed = True
            err_console.print(f"[bold red]{f}: {len(err.problems)} problem(s)[/]", soft_wrap=True)
            for p in err.problems:
                err_console.print(f"  {p}", highlight=False, markup=False, soft_wrap=True)
            continue
        except FileNotFoundError as err:
            failed = True
            err_console.print(f"[bold red]{err}[/]")
            continue
        summary = summarize_pairs(pairs, tok)
        table = Table(title=f"{f}: {summary.n} valid pairs")
        table.add_column("axis")
        table.add_column("split")
        table.add_column("pairs", justify="right")
        for (axis, spl), n in summary.by_axis_split.items():
            table.add_row(axis, spl, str(n))
        console.print(table)
        if summary.token_percentiles:
            lt = Table(title="prompt length in tokens")
            lt.add_column("side")
            for q in (50, 90, 99, 100):
                lt.add_column(f"p{q}" if q < 100 else "max", justify="right")
            for side, qs in summary.token_percentiles.items():
                lt.add_row(side, *(str(qs[q]) for q in (50, 90, 99, 100)))
            console.print(lt)
    if failed:
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover - entry point
    app(prog_name="opct")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
