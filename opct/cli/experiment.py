"""``opct run``, ``opct demo`` and ``opct report``: experiments and their reports. Studies are the lab's
(``opct-lab run``, ``opct-lab report``): here they are refused, naming the lab's command. Recipe selection
(``opct-lab select``) is no opct command: the error for ``select`` names the lab's (:data:`opct.cli.boundary.LAB_COMMANDS`)."""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group

from opct.cli.boundary import (
    NoProgress,
    SetOverrides,
    Threads,
    _fail,
    apply_threads,
    available_cores,
    console,
    err_console,
    with_path,
)
from opct.config import ConfigError
from opct.experiments.files import read_extended
from opct.experiments.invalidation import parse_force
from opct.experiments.runner import IncompleteEvalError, load_experiment, resolve, run_experiment, run_stage
from opct.report import write_report
from opct.report.folders import check_experiment_folder, check_report_out, mark_report_out
from opct.report.load import load_experiment as load_experiment_folder
from opct.report.terminal import results_group
from opct.runs.experiment_layout import REPORT_HTML
from opct.runs.outputs import output_owner


def jobs_count(value: str | int) -> int:
    """``--jobs``: a whole number of at least 1, or ``auto``: one job per core this process may use
    (:func:`~opct.cli.boundary.available_cores`: its affinity mask, capped by a cgroup quota). Each job is a
    process with one CPU thread, so the results are those of ``--jobs 1 --threads 1`` whatever the count."""
    if isinstance(value, int):
        return value
    if value.strip().lower() == "auto":
        return available_cores()
    try:
        count = int(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r}: use a whole number of at least 1, or auto (one per core)") from None
    if count < 1:
        raise typer.BadParameter(f"{value!r}: use a whole number of at least 1, or auto (one per core)")
    return count


_JOBS_HELP = ("Stages at a time, each in its own process with one CPU thread (training runs side by side; a model's "
              "eval and attack once it is trained); the same results as --jobs 1 --threads 1. auto: one per available "
              "core (affinity and cgroup quota).")
#: ``--jobs N|auto`` on ``opct run`` (default 1: every stage in this process, one after another).
Jobs = Annotated[int, typer.Option("--jobs", metavar="N|auto", parser=jobs_count,
                                   help=_JOBS_HELP + " Default 1: every stage in this process, one after another.")]
#: ``--jobs N|auto`` on ``opct demo`` (default auto: the demo uses every core it may).
DemoJobs = Annotated[int, typer.Option("--jobs", metavar="N|auto", parser=jobs_count,
                                       help=_JOBS_HELP + " Default auto.")]


def refuse_study_file(config: Path) -> None:
    """A :class:`~opct.config.ConfigError` (exit 2) when ``config`` is a study file (it, or a file its ``extends:``
    chain names, has ``families``): studies run in the lab, ``opct-lab run``."""
    tree, _ = read_extended(config, "experiment")
    if "families" in tree:
        raise ConfigError(f"{config} is a study (it has families:): studies run in the lab, with "
                          f"`opct-lab run {config}` (pip install -e ./lab; docs/development.md); opct run runs one experiment")


def run_experiment_file(
    config: Path, set_: list[str] | None, dry_run: bool, no_progress: bool, threads: int | None = None,
    force: list[str] | None = None, print_config: bool = False, jobs: int = 1, stage: str | None = None,
) -> None:
    """``opct run``/``demo``: an experiment; ``threads`` (the flag) over the file's ``threads:``; ``force``: the
    stages to redo (``--force train:opct``); ``print_config``: print the resolved settings (``extends:`` chain and
    ``--set`` applied) as YAML and stop; ``jobs``: stages at a time, each in a worker process; ``stage``: run only
    that stage (what such a worker runs)."""
    refuse_study_file(config)
    cfg = load_experiment(config, set_ or [])
    if stage is not None:  # a worker of --jobs N: one stage, nothing else printed
        apply_threads(threads if threads is not None else cfg.threads)
        run_stage(cfg, stage, force or [], log=log_line)
        return
    if print_config:
        # resolve() checks every run's settings as opct train does: a misspelt key is refused, not printed
        print_settings(cfg, {r.key: r.config for r in resolve(cfg).runs})
        return
    plan = resolve(cfg)
    parse_force(force or [], {"train": [r.key for r in plan.runs], "eval": list(plan.models),
                              "attack": list(plan.models) if cfg.attack.enabled else []})  # a bad one fails now
    console.print(plan.describe(), highlight=False, markup=False)
    if dry_run:
        return
    apply_threads(threads if threads is not None else cfg.threads)

    run_and_show(lambda: run_experiment(cfg, show_progress=not no_progress, log=log_line, force=force or [], jobs=jobs),
                 results_group, cfg.root, REPORT_HTML, "report.md and samples.html")


def print_settings(cfg: Any, runs: dict[str, Any] | None = None) -> None:
    """An experiment's or study's settings as the run would use them, as YAML on stdout; an experiment's
    training ``runs`` follow, each as it will train (``train:``, the method's ``method_settings`` and a variant's
    settings applied, every default filled), as YAML comments, so that the output still reads as the experiment."""
    import yaml

    text = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False).rstrip()
    if runs:
        resolved = yaml.safe_dump({"runs": {key: run.model_dump(mode="json") for key, run in runs.items()}},
                                  sort_keys=False).rstrip()
        text += ("\n# Each training run as it will train (train:, then its method_settings and variant, every default "
                 "filled):\n" + "\n".join(f"# {line}" for line in resolved.splitlines()))
    console.print(text, highlight=False, markup=False, soft_wrap=True)  # YAML: never wrapped


def log_line(message: str) -> None:
    """A progress line of a run, printed as written (``[stage]`` is text, not rich markup)."""
    console.print(message, highlight=False, markup=False)


def run_and_show(run: Callable[[], Path], tables: Callable[[Path, int], Any], root: Path, report: str, also: str) -> None:
    """Run an experiment or a study, then print where its report is and its result tables, which end with
    the verdict block; when an eval is incomplete, the tables first (they show which), then the error with
    exit code 1."""
    try:
        run()
    except IncompleteEvalError as err:
        console.print(tables(root, console.width))
        _fail(str(err), code=1)
    console.print(with_path("report: ", root / report, f" (and {also})"))
    console.print(tables(root, console.width))  # last: the tables, ending with the verdict block


def run(
    experiment: Annotated[Path, typer.Argument(help="Experiment YAML (model, axes, methods, seeds, settings).")],
    set_: SetOverrides = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved plan and exit.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
    force: Annotated[list[str] | None, typer.Option(
        "--force", metavar="STAGE", help="Redo a stage even if its inputs did not change: train, eval or attack, for "
        "every model or one (train:opct, eval:bct, attack:base); repeatable. A retrained run's old directory is kept "
        "in <experiment>/replaced/.")] = None,
    print_config: Annotated[bool, typer.Option(
        "--print-config", help="Print the resolved settings (the extends: chain and --set applied) as YAML and exit; "
        "an experiment's training runs follow, each fully resolved, as YAML comments.")] = False,
    jobs: Jobs = 1,
    stage: Annotated[str | None, typer.Option("--stage", hidden=True, help="Run only this stage (a --jobs worker).")] = None,
) -> None:
    """Run an experiment: base eval, training per method, evaluation, attack, report (resumable: a rerun redoes
    the stages whose inputs changed, by content hash). A study file (one with families:) is the lab's: opct-lab run."""
    run_experiment_file(experiment, set_, dry_run, no_progress, threads, force, print_config, jobs, stage)


def demo(
    set_: SetOverrides = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved plan and exit.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
    jobs: DemoJobs = "auto",  # type: ignore[assignment]  # jobs_count turns it into the core count
) -> None:
    """The paper's comparison on the built-in organism: baseline vs BCT vs OPCT on all three axes, each
    method on its shipped recipe, chosen on the validation split (the full study over three families, and
    choosing anew, are the lab's: opct-lab demo-full, opct-lab select). ACT joins with
    --set 'methods=[base,bct,opct,act]'."""
    run_experiment_file(Path(str(files("opct") / "experiments" / "organism_demo.yaml")), list(set_ or []), dry_run,
                        no_progress, threads, jobs=jobs)


def report(
    experiment_dir: Annotated[Path, typer.Argument(
        help="An experiment or study directory (runs/experiments/<name>), or Inspect logs of opct's tasks "
             "(a .eval file or a folder of them).")],
    out: Annotated[Path | None, typer.Option(
        metavar="DIR", help="Write the report here (a new or empty folder, or an earlier --out) instead of into the "
                            "experiment folder.")] = None,
) -> None:
    """(Re)write an experiment's report.html and report.md and print its table and the paired differences
    between every two methods (a study's pooled report is the lab's: opct-lab report); for Inspect logs of
    opct's tasks (inspect eval opct/<axis>), opct's results table recomputed from their records. Writes
    only into an experiment folder or a new --out: a training run, an eval, an empty folder or one of
    someone else's files is refused."""
    if experiment_dir.suffix in (".eval", ".json") or (experiment_dir.is_dir() and any(experiment_dir.glob("*.eval"))):
        # deferred: loads torch and transformers only when called
        from opct.inspect_eval.logs import is_inspect_log_path, report_renderables

        if is_inspect_log_path(experiment_dir):
            console.print(Group(*report_renderables(experiment_dir)))
            return
    owner = output_owner(experiment_dir) if experiment_dir.is_dir() else None
    if owner is not None and owner.kind == "study":
        raise ConfigError(f"{experiment_dir} is a study: its pooled report is the lab's, `opct-lab report {experiment_dir}`; "
                          "opct report reads one experiment (a family's folder inside it)")
    check_experiment_folder(experiment_dir)
    if out is not None:
        check_report_out(out)
        mark_report_out(out, experiment_dir)
    for line in load_experiment_folder(experiment_dir).warnings:  # the report lists them too; the reader sees them now
        err_console.print(f"warning: {line}", highlight=False, soft_wrap=True, markup=False)
    html, _ = write_report(experiment_dir, out)
    console.print(with_path("report: ", html, " (and report.md, samples.html)"))
    console.print(results_group(experiment_dir, console.width))  # last: ending with the verdict block
