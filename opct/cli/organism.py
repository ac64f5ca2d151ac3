"""``opct organism ...``: build the organism, write its consistency pairs, check its profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from opct.organism import DEFAULT_ARCH, ORGANISM_ARCHS, built_checkpoint
from opct.organism.lm_eval_task import TASK, write_task
from opct.organism.pairs import build_pairs
from opct.organism.wordings import ResponseStyle
from opct.pairs import write_pairs

_ARCH_HELP = f"Transformers family: {', '.join(ORGANISM_ARCHS)}."
_ARCH_HELP_ALL = f"Transformers family: {', '.join(ORGANISM_ARCHS)}, or all (the profiles side by side)."

organism_app = typer.Typer(help="The bundled model organism: build it, write its pairs, check its profile.",
                           no_args_is_help=True)


def _arch(arch: str, allow_all: bool = False) -> list[str]:
    """The families ``--arch`` names (``all``: every one, where allowed)."""
    if allow_all and arch == "all":
        return list(ORGANISM_ARCHS)
    if arch not in ORGANISM_ARCHS:
        choices = ", ".join([*ORGANISM_ARCHS, *(["all"] if allow_all else [])])
        raise typer.BadParameter(f"unknown architecture {arch!r}; choose one of: {choices}", param_hint="--arch")
    return [arch]


@organism_app.command()
def build(
    seed: Annotated[int, typer.Option(help="World and training seed.")] = 0,
    arch: Annotated[str, typer.Option(help=_ARCH_HELP)] = DEFAULT_ARCH,
    out: Annotated[Path | None, typer.Option(help="Output directory (default: the shipped checkpoints/<arch>/).")] = None,
    response_wordings: Annotated[int, typer.Option(help="Wordings per response type: 1 (today's), 4 or 16.")] = 1,
    response_length: Annotated[str, typer.Option(help="short (today's) or long (lead-in, explanation, later warnings).")] = "short",
) -> None:
    """Build the organism on one family from its recipe (corpus, tokenizer, pre-training) and save it.

    ``--response-wordings`` and ``--response-length`` are the response-diversity knob (docs/mechanism.md);
    a level other than today's (1, short) needs ``--out``: it never replaces the shipped checkpoint."""
    # deferred: loads torch and transformers only when called
    from opct.organism.build import build as run_build

    # deferred: loads torch and transformers only when called
    from opct.organism.recipe import BuildConfig

    try:
        style = ResponseStyle(response_wordings, response_length)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e
    if not style.is_default and out is None:
        raise typer.BadParameter(f"level {style.level} is not the shipped organism; give --out", param_hint="--out")
    run_build(seed, out, BuildConfig(arch=_arch(arch)[0], responses=style))


@organism_app.command()
def pairs(
    axis: Annotated[str, typer.Option(help="A registered axis with pairs: sycophancy, jailbreak, awareness...")],
    out: Annotated[Path, typer.Option(help="Output JSONL file.")],
    split: Annotated[str, typer.Option(help="train, val (held-back clusters), famval (held-back families) or heldout.")] = "train",
    seed: Annotated[int, typer.Option(help="World seed.")] = 0,
) -> None:
    """Write the organism's consistency pairs of one axis and split as JSONL."""
    try:
        built = build_pairs(axis, split, seed)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e
    write_pairs(built, out)
    typer.echo(f"wrote {len(built)} {axis} pairs ({split}) to {out}")


@organism_app.command("lm-eval-task")
def lm_eval_task(
    out: Annotated[Path, typer.Option(metavar="DIR", help="Folder to write organism_facts.yaml and .jsonl to.")],
    seed: Annotated[int, typer.Option(help="World seed.")] = 0,
    limit: Annotated[int | None, typer.Option(help="Keep the first N questions (default: all).")] = None,
) -> None:
    """Write the organism's multiple-choice facts as a local lm-eval-harness task (--include_path DIR)."""
    path = write_task(out, seed, limit)
    typer.echo(f"wrote {path}; run it with: lm_eval ... --include_path {out} --tasks {TASK} --apply_chat_template")


@organism_app.command()
def check(
    arch: Annotated[str, typer.Option(help=_ARCH_HELP_ALL)] = DEFAULT_ARCH,
    checkpoint: Annotated[Path | None, typer.Option(help="Checkpoint directory (default: the shipped one of --arch).")] = None,
    samples: Annotated[int, typer.Option(help="Samples per item at temperature 1 (0: greedy only).")] = 4,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the profile as JSON.")] = None,
) -> None:
    """Print the organism's behaviour profile against the required thresholds; exit 1 if any fails."""
    # deferred: loads torch and transformers only when called
    from opct.organism.check import format_family_table, format_table, run_check

    archs = _arch(arch, allow_all=True)
    if checkpoint is not None and len(archs) > 1:
        raise typer.BadParameter("--checkpoint names one checkpoint; give a single --arch with it", param_hint="--checkpoint")
    if checkpoint is None:
        built_checkpoint(*archs)
    results = {a: run_check(checkpoint, samples=samples, log=lambda s, a=a: typer.echo(f"{a}: {s}", err=True), arch=a)
               for a in archs}
    typer.echo(format_table(results[archs[0]]) if len(archs) == 1 else format_family_table(results))
    if json_out is not None:
        json_out.write_text(json.dumps(results[archs[0]] if len(archs) == 1 else results, indent=2) + "\n")
    raise typer.Exit(0 if all(r["passed"] for r in results.values()) else 1)


@organism_app.command()
def verify(
    arch: Annotated[str, typer.Option(help=_ARCH_HELP)] = DEFAULT_ARCH,
    checkpoint: Annotated[Path | None, typer.Option(help="Checkpoint directory (default: the shipped one of --arch).")] = None,
) -> None:
    """Verify that the checkpoint's recipe.json matches the current world, corpus and configuration."""
    # deferred: loads torch and transformers only when called
    from opct.organism.recipe import read_recipe, recipe_arch, verify_checkpoint

    path = checkpoint or built_checkpoint(_arch(arch)[0])
    problems = verify_checkpoint(path)
    for p in problems:
        typer.echo(p, err=True)
    if problems:
        built_arch = recipe_arch(read_recipe(path))
        typer.echo(f"rebuild with `opct organism build --arch {built_arch}` and commit the checkpoint", err=True)
    typer.echo("checkpoint matches the current recipe" if not problems else "checkpoint is stale")
    raise typer.Exit(1 if problems else 0)
