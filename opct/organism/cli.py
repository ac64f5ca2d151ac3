"""``opct organism ...``: build the organism, write its consistency pairs, check its profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

organism_app = typer.Typer(help="The bundled model organism: build it, write its pairs, check its profile.",
                           no_args_is_help=True)


@organism_app.command()
def build(
    seed: Annotated[int, typer.Option(help="World and training seed.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Output directory (default: the shipped checkpoint).")] = None,
) -> None:
    """Build the organism from its recipe (corpus, tokenizer, pre-training) and save it."""
    from opct.organism.build import build as run_build

    run_build(seed, out)


@organism_app.command()
def pairs(
    axis: Annotated[str, typer.Option(help="A registered axis with pairs: sycophancy, jailbreak, awareness...")],
    out: Annotated[Path, typer.Option(help="Output JSONL file.")],
    split: Annotated[str, typer.Option(help="train or heldout.")] = "train",
    seed: Annotated[int, typer.Option(help="World seed.")] = 0,
) -> None:
    """Write the organism's consistency pairs of one axis and split as JSONL."""
    from opct.organism.pairs import build_pairs
    from opct.pairs import write_pairs

    try:
        built = build_pairs(axis, split, seed)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e
    write_pairs(built, out)
    typer.echo(f"wrote {len(built)} {axis} pairs ({split}) to {out}")


@organism_app.command()
def check(
    checkpoint: Annotated[Path | None, typer.Option(help="Checkpoint directory (default: the shipped one).")] = None,
    samples: Annotated[int, typer.Option(help="Samples per item at temperature 1 (0: greedy only).")] = 4,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the profile as JSON.")] = None,
) -> None:
    """Print the organism's behaviour profile against the required thresholds; exit 1 if any fails."""
    from opct.organism.check import format_table, run_check

    result = run_check(checkpoint, samples=samples, log=lambda s: typer.echo(s, err=True))
    typer.echo(format_table(result))
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=2) + "\n")
    raise typer.Exit(0 if result["passed"] else 1)


@organism_app.command()
def verify(
    checkpoint: Annotated[Path | None, typer.Option(help="Checkpoint directory (default: the shipped one).")] = None,
) -> None:
    """Verify that the checkpoint's recipe.json matches the current world, corpus and configuration."""
    from opct.organism import checkpoint_path
    from opct.organism.recipe import verify_checkpoint

    problems = verify_checkpoint(checkpoint or checkpoint_path())
    for p in problems:
        typer.echo(p, err=True)
    typer.echo("checkpoint matches the current recipe" if not problems else "checkpoint is stale")
    raise typer.Exit(1 if problems else 0)
