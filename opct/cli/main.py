"""The ``opct`` command group: its global options, ``train`` and ``export``, and every other command
registered from the module of its group (:mod:`opct.cli.experiment`, :mod:`opct.cli.eval`,
:mod:`opct.cli.attack`, :mod:`opct.cli.pairs`, :mod:`opct.cli.organism`, :mod:`opct.cli.env`,
:mod:`opct.cli.data`, :mod:`opct.cli.model`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from opct.cli.attack import attack
from opct.cli.boundary import (
    DEBUG,
    DebugFlag,
    ErrorBoundary,
    NoProgress,
    SetOverrides,
    Threads,
    VerboseFlag,
    apply_threads,
    console,
    with_path,
)
from opct.cli.data import data_app
from opct.cli.env import env, version_callback
from opct.cli.eval import eval_, with_real_data_flags
from opct.cli.experiment import demo, report, run
from opct.cli.model import model_app
from opct.cli.organism import organism_app
from opct.cli.pairs import pairs_app
from opct.config import dump_config, load_config
from opct.quiet import quiet_unless_verbose

app = typer.Typer(cls=ErrorBoundary, add_completion=False, no_args_is_help=True,
                  help="On-Policy Consistency Training for Hugging Face causal LMs.")


@app.callback()
def _options(
    ctx: typer.Context,
    debug: DebugFlag = False,
    verbose: VerboseFlag = False,
    version: Annotated[bool, typer.Option("--version", callback=version_callback, is_eager=True,
                                          help="Print opct's version and exit.")] = False,
) -> None:
    """On-Policy Consistency Training for Hugging Face causal LMs."""
    DEBUG["on"] = debug
    quiet_unless_verbose(ctx, verbose)


def _organism_app() -> typer.Typer:
    return organism_app


app.add_typer(_organism_app(), name="organism")

app.add_typer(pairs_app, name="pairs")
app.add_typer(data_app, name="data")
app.add_typer(model_app, name="model")


@app.command()
def train(
    config: Annotated[Path | None, typer.Option("--config", "-c", metavar="FILE", help="YAML run configuration.")] = None,
    set_: SetOverrides = None,
    no_progress: NoProgress = False,
    print_config: Annotated[bool, typer.Option("--print-config", help="Print the resolved configuration and exit.")] = False,
    allow_heldout_training: Annotated[bool, typer.Option(
        "--allow-heldout-training", help="Train on pairs marked held-out (meta.split: heldout); refused by default.")] = False,
    threads: Threads = None,
    method: Annotated[str | None, typer.Option(
        "--method", metavar="NAME", help="Train with this method (opct, bct, ...) instead of the file's: the old "
        "method's generation length, memory and engine keys carry over, the rest of its section is dropped (a note "
        "names each key); the same as --set method=NAME.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the per-GPU memory estimate and the step's composition, and exit: nothing loads "
        "(the model's shape from its config.json, the HF cache or opct's table of known models).")] = False,
    gpus: Annotated[int, typer.Option("--gpus", min=1, metavar="N", help="With --dry-run: GPUs (processes) the "
                                      "run is launched on.")] = 1,
    fsdp: Annotated[bool, typer.Option("--fsdp", help="With --dry-run: the run is sharded with FSDP2 over the GPUs "
                                       "(configs/accelerate/fsdp2.yaml); otherwise DDP.")] = False,
    gpu_memory: Annotated[float | None, typer.Option(
        "--gpu-memory", min=1.0, metavar="GIB", help="With --dry-run: each GPU's memory; says whether the step fits.")] = None,
) -> None:
    """Train with OPCT or BCT; rerunning the same command resumes an interrupted run."""
    import yaml


    # every error reaches ErrorBoundary (opct/cli/boundary.py), which prints it and picks the exit code
    overrides = [*([f"method={method}"] if method else []), *(set_ or []),
                 *(["data.allow_heldout_training=true"] if allow_heldout_training else [])]
    cfg = load_config(config, overrides)
    if print_config:
        console.print(yaml.safe_dump(dump_config(cfg), sort_keys=False), highlight=False, markup=False)
        return
    if not dry_run and (gpus != 1 or fsdp or gpu_memory is not None):
        raise typer.BadParameter("--gpus, --fsdp and --gpu-memory describe a dry run: add --dry-run (a launch takes "
                                 "its GPUs from accelerate launch)", param_hint="--dry-run")
    if dry_run:
        from opct.cli.train_plan import plan_lines  # deferred: it imports torch (through opct.models)

        console.print("\n".join(plan_lines(cfg, gpus, fsdp, gpu_memory)), highlight=False, markup=False, soft_wrap=True)
        return
    apply_threads(threads if threads is not None else cfg.threads)
    # deferred: loads accelerate, torch and transformers only when called
    from opct.training.loop import train as run_training

    result = run_training(cfg, show_progress=not no_progress)
    if result.is_main_process and result.already_complete:
        console.print(with_path(f"already complete at step {result.steps}; nothing trained. Checkpoint in ", result.final_dir))
    elif result.is_main_process:
        resumed = f" (resumed at step {result.start_step})" if result.start_step else ""
        console.print(with_path(f"done: {result.steps} steps{resumed}; checkpoint in ", result.final_dir))


app.command()(run)
app.command()(demo)
app.command()(report)
app.command()(attack)
app.command("eval")(with_real_data_flags(eval_))


@app.command()
def export(
    model: Annotated[str, typer.Argument(metavar="RUN", help="A run directory or its final/.")],
    out: Annotated[Path | None, typer.Option(metavar="DIR", help="The folder to write (outside final/); optional with --push-to-hub.")] = None,
    dtype: Annotated[str | None, typer.Option(help="float32, bfloat16, float16 or auto (default: the run's own).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace DIR if it holds an earlier export (nothing else is ever replaced).")] = False,
    trust_remote_code: Annotated[bool, typer.Option(
        "--trust-remote-code", help="Allow the model's own code (a checkpoint's files never turn it on).")] = False,
    push_to_hub: Annotated[str | None, typer.Option("--push-to-hub", metavar="REPO",
                                                    help="Also upload the export to this hub repository (owner/name).")] = None,
    private: Annotated[bool, typer.Option("--private", help="With --push-to-hub: create the repository private.")] = False,
    adapter_only: Annotated[bool, typer.Option(
        "--adapter-only", help="A LoRA run: export (and push) the adapter as it is, to load on its base, instead of merging it.")] = False,
    eval_results: Annotated[list[Path] | None, typer.Option(
        "--eval-results", metavar="DIR", help="An opct eval folder of this checkpoint (repeatable): its results go into the "
        "card's model-index when they measured exactly these weights. An experiment's own evals of the run are found without it.")] = None,
    base_model: Annotated[str | None, typer.Option(
        "--base-model", metavar="ID_OR_PATH", help="Where users will find the base (a hub id, or a folder path as given): "
        "written into adapter_config.json and the card, so peft's AutoPeftModelForCausalLM and lm-eval load the export.")] = None,
) -> None:
    """Write a trained checkpoint as one model folder (a LoRA adapter merged into its base, base weights
    checked): loadable by any Hugging Face tool, e.g. lm-eval-harness's --model hf pretrained=DIR. With
    --adapter-only, the adapter itself. No exported file holds a local absolute path; the card's
    model-index holds the run's own eval results, when there are any."""
    import tempfile

    # deferred: loads torch and transformers only when called
    from opct.training.export import export_merged, hub_token

    # deferred: loads torch and transformers only when called
    from opct.training.export import push_to_hub as push

    if out is None and push_to_hub is None:
        raise typer.BadParameter("give --out DIR, --push-to-hub REPO, or both", param_hint="--out")
    token = hub_token() if push_to_hub else None  # no login: refused before anything is merged
    with tempfile.TemporaryDirectory(prefix="opct-export-") as scratch:
        target = out if out is not None else Path(scratch) / "export"
        folder = export_merged(model, target, dtype=dtype, overwrite=overwrite, trust_remote_code=trust_remote_code,
                               eval_results=list(eval_results or []), adapter_only=adapter_only, base_model=base_model,
                               name=push_to_hub.split("/")[-1] if push_to_hub else None)
        if out is not None:
            console.print(with_path("exported to ", folder))
        if push_to_hub:
            url = push(folder, push_to_hub, private=private, token=token)
            console.print(with_path("pushed to ", url))


app.command()(env)


def main() -> None:  # pragma: no cover - entry point
    app(prog_name="opct")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
