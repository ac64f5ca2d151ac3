"""``opct run``, ``opct demo`` and ``opct report``: experiments and studies, and their reports."""

from __future__ import annotations

from collections.abc import Callable
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


def _run_experiment(
    config: Path | None, set_: list[str] | None, dry_run: bool, no_progress: bool, threads: int | None = None,
    force: list[str] | None = None, print_config: bool = False, jobs: int = 1, stage: str | None = None,
    family: list[str] | None = None,
) -> None:
    """``opct run``/``demo``: an experiment or a study; ``threads`` (the flag) over the file's ``threads:``;
    ``force``: the stages to redo (``--force train:opct``); ``print_config``: print the resolved settings
    (``extends:`` chain and ``--set`` applied) as YAML and stop; ``jobs``: stages at a time, each in a worker
    process; ``stage``: run only that stage (what such a worker runs); ``family``: a study's families to run alone."""
    from opct.config import ConfigError
    from opct.experiments.invalidation import parse_force
    from opct.experiments.runner import load_experiment, resolve, run_experiment, run_stage
    from opct.experiments.study import is_study_file

    if config is not None and is_study_file(config):
        if force or stage:
            raise ConfigError(f"--force and --stage work on an experiment file; {config} is a study: run a family's "
                              "experiment file with --force, or delete the stage's folder in the study's output")
        _run_study(config, set_, dry_run, no_progress, threads, print_config, jobs, family)
        return
    if family:
        raise ConfigError(f"--family works on a study file (one with families:); {config} is an experiment")
    cfg = load_experiment(config, set_ or [])
    if stage is not None:  # a worker of --jobs N: one stage, nothing else printed
        apply_threads(threads if threads is not None else cfg.threads)
        run_stage(cfg, stage, force or [], log=_log_line)
        return
    if print_config:
        # resolve() checks every run's settings as opct train does: a misspelt key is refused, not printed
        _print_settings(cfg, {r.key: r.config for r in resolve(cfg).runs})
        return
    plan = resolve(cfg)
    parse_force(force or [], {"train": [r.key for r in plan.runs], "eval": list(plan.models),
                              "attack": list(plan.models) if cfg.attack.enabled else []})  # a bad one fails now
    console.print(plan.describe(), highlight=False, markup=False)
    if dry_run:
        return
    apply_threads(threads if threads is not None else cfg.threads)
    from opct.report.terminal import results_group
    from opct.runs.experiment_layout import REPORT_HTML

    _run_and_show(lambda: run_experiment(cfg, show_progress=not no_progress, log=_log_line, force=force or [], jobs=jobs),
                  results_group,
                  cfg.root, REPORT_HTML, "report.md and samples.html")


def _run_study(config: Path, set_: list[str] | None, dry_run: bool, no_progress: bool, threads: int | None,
               print_config: bool = False, jobs: int = 1, family: list[str] | None = None) -> None:
    from opct.experiments.study import chosen_families, load_study, resolve_study, run_study
    from opct.report.study import study_group
    from opct.runs.experiment_layout import REPORT_MD

    study = load_study(config, set_ or [])
    chosen_families(study, family)  # an unknown --family fails before anything prints
    if print_config:
        resolve_study(study)  # every family's runs checked as opct train checks them (a misspelt key is refused)
        _print_settings(study)
        return
    console.print(resolve_study(study).describe(), highlight=False, markup=False)
    if dry_run:
        return
    apply_threads(threads if threads is not None else study.threads)
    tables, report, also = study_group, REPORT_MD, "report.json; each family's own report in its folder"
    if family:  # some families alone: their own reports, no pooled one (run_study says so)
        from opct.report.terminal import results_group
        from opct.runs.experiment_layout import REPORT_HTML

        def tables(root: Path, width: int) -> Group:
            return Group(*(results_group(root / f, width) for f in family))

        report, also = f"{family[0]}/{REPORT_HTML}", "each chosen family's report.md in its folder"
    _run_and_show(lambda: run_study(study, show_progress=not no_progress, log=_log_line, jobs=jobs, only=family),
                  tables, study.root, report, also)


def _print_settings(cfg: Any, runs: dict[str, Any] | None = None) -> None:
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


def _log_line(message: str) -> None:
    """A progress line of a run, printed as written (``[stage]`` is text, not rich markup)."""
    console.print(message, highlight=False, markup=False)


def _run_and_show(run: Callable[[], Path], tables: Callable[[Path, int], Any], root: Path, report: str, also: str) -> None:
    """Run an experiment or a study, then print where its report is and its result tables, which end with
    the verdict block; when an eval is incomplete, the tables first (they show which), then the error with
    exit code 1."""
    from opct.experiments.runner import IncompleteEvalError

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
    family: Annotated[list[str] | None, typer.Option(
        "--family", metavar="NAME", help="A study file: run this family alone (repeatable); each family's report is "
        "written, the pooled one waits for a run of the whole study, which resumes the finished families.")] = None,
) -> None:
    """Run an experiment: base eval, training per method, evaluation, attack, report (resumable: a rerun redoes
    the stages whose inputs changed, by content hash). A study file (one with families:) runs its experiment
    once per family, then the pooled report."""
    _run_experiment(experiment, set_, dry_run, no_progress, threads, force, print_config, jobs, stage, family)


def demo(
    set_: SetOverrides = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved plan and exit.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
    full: Annotated[bool, typer.Option("--full", help="The full comparison: 3 organism families x 3 seeds, "
                                       "then OPCT − BCT pooled with a verdict per metric (resumable).")] = False,
    reselect: Annotated[bool, typer.Option("--reselect", help="Choose the recipes anew first (opct select on "
                                           "organism_selection.yaml, resumable; with --full, once per model family) "
                                           "instead of the shipped picks.")] = False,
    rule: Annotated[str, typer.Option(help="Whose picks train: teacher_kl (the default, as shipped), good_behaviour "
                                      "(method-neutral) or family_transfer (method-neutral, on held-back families); "
                                      "a rule other than teacher_kl gets its own output folder.")] = "teacher_kl",
    compare_rules: Annotated[bool, typer.Option("--compare-rules", help="Also train every other rule's pick where it "
                                                "differs (variants <method>-<rule>, side by side in the report).")] = False,
    jobs: DemoJobs = "auto",  # type: ignore[assignment]  # jobs_count turns it into the core count
) -> None:
    """The paper's comparison on the built-in organism: baseline vs BCT vs OPCT on all three axes, each
    method on its own recipe chosen on the validation split (shipped, or anew with --reselect). ACT
    joins with --set 'methods=[base,bct,opct,act]'."""
    import json
    from importlib.resources import files

    from opct.experiments.recipes import PICK_RULES

    if rule not in PICK_RULES:
        _fail(f"--rule {rule!r}: use {', '.join(PICK_RULES)}")
    folder = Path(str(files("opct") / "experiments"))
    overrides = list(set_ or [])
    evidence = folder / "organism_selection.json"
    log = lambda line: err_console.print(line, highlight=False, markup=False)  # noqa: E731
    if reselect and full:
        from opct.experiments.study import load_study, select_per_family

        chosen = select_per_family(load_study(folder / "organism_demo_full.yaml", overrides),
                                   folder / "organism_selection.yaml", jobs=2, log=log)
        overrides.append("family_picks=" + json.dumps({f: {"selection": str(p.resolve()), "rule": rule} for f, p in chosen.items()}))
        evidence = chosen[next(iter(chosen))].resolve()  # the shared picks: the first family's (every family has its own)
    elif reselect:
        from opct.experiments.selection import load_selection, run_selection

        evidence = run_selection(load_selection(folder / "organism_selection.yaml"), jobs=2, log=log).resolve()
    elif full and rule != "teacher_kl":
        overrides.append(f"pick_rule={rule}")
    if reselect or rule != "teacher_kl":
        picks = json.loads(evidence.read_text(encoding="utf-8"))["method_settings"]
        if rule not in picks:
            _fail(f"--rule {rule}: {evidence} holds no {rule} picks (it predates that rule); choose anew with --reselect")
        overrides += [f"method_settings={json.dumps(picks[rule])}", f"selection={evidence}"]
    if compare_rules:
        overrides.append("compare_rules=true")
    name = "organism_demo_full.yaml" if full else "organism_demo.yaml"
    if rule != "teacher_kl":
        overrides.append(f"name={'organism-demo-full' if full else 'organism-demo'}-{rule.replace('_', '-')}")
    _run_experiment(folder / name, overrides, dry_run, no_progress, threads, jobs=jobs)


def report(
    experiment_dir: Annotated[Path, typer.Argument(
        help="An experiment or study directory (runs/experiments/<name>), or Inspect logs of opct's tasks "
             "(a .eval file or a folder of them).")],
    out: Annotated[Path | None, typer.Option(
        metavar="DIR", help="Write the report here (a new or empty folder, or an earlier --out) instead of into the "
                            "experiment folder.")] = None,
) -> None:
    """(Re)write an experiment's report.html and report.md and print its table and the paired differences
    between every two methods; for a study, its pooled report.md and report.json; for Inspect logs of
    opct's tasks (inspect eval opct/<axis>), opct's results table recomputed from their records. Writes
    only into an experiment folder or a new --out: a training run, an eval, an empty folder or one of
    someone else's files is refused."""
    from opct.experiments.study import is_study_dir
    from opct.report import write_report
    from opct.report.folders import check_experiment_folder, check_report_out, mark_report_out
    from opct.report.load import load_experiment
    from opct.report.terminal import results_group

    if experiment_dir.suffix in (".eval", ".json") or (experiment_dir.is_dir() and any(experiment_dir.glob("*.eval"))):
        from opct.inspect_eval.logs import is_inspect_log_path, report_renderables

        if is_inspect_log_path(experiment_dir):
            console.print(Group(*report_renderables(experiment_dir)))
            return
    if is_study_dir(experiment_dir) and out is None:
        from opct.report.study import study_renderables, write_study_report
        from opct.runs.experiment_layout import ExperimentLayout

        data = write_study_report(experiment_dir)
        console.print(with_path("report: ", ExperimentLayout(experiment_dir).report_md, " (and report.json)"))
        console.print(Group(*study_renderables(data, console.width)))  # last: ending with the verdict block
        return
    check_experiment_folder(experiment_dir)
    if out is not None:
        check_report_out(out)
        mark_report_out(out, experiment_dir)
    for line in load_experiment(experiment_dir).warnings:  # the report lists them too; the reader sees them now
        err_console.print(f"warning: {line}", highlight=False, soft_wrap=True, markup=False)
    html, _ = write_report(experiment_dir, out)
    console.print(with_path("report: ", html, " (and report.md, samples.html)"))
    console.print(results_group(experiment_dir, console.width))  # last: ending with the verdict block


def select(
    config: Annotated[Path, typer.Argument(help="Selection YAML (an experiment plus a selection: block).")],
    set_: SetOverrides = None,
    jobs: Annotated[int, typer.Option(min=1, metavar="N", help="Candidate runs at a time (each its own process, 1 thread).")] = 1,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the candidate runs and exit.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
) -> None:
    """Choose each method's recipe on the validation split: train every candidate (resumable), apply the
    fixed rules, write selection.json."""
    from opct.experiments.selection import candidate_configs, load_selection, run_selection
    from opct.report.selection import chosen_lines, selection_table

    cfg = load_selection(config, set_)
    runs = candidate_configs(cfg)
    if dry_run:
        for _cid, method, recipe, run in runs:
            console.print(f"{run.name}: {method} {recipe} -> {run.run_dir}", highlight=False, markup=False)
        console.print(f"{len(runs)} candidate runs; selection.json in {cfg.root}", markup=False)
        return
    apply_threads(threads if threads is not None else cfg.threads)
    path = run_selection(cfg, jobs=jobs, log=lambda line: err_console.print(line, highlight=False, markup=False))
    import json

    selection = json.loads(path.read_text(encoding="utf-8"))
    console.print(selection_table(selection))
    for line in chosen_lines(selection):
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    console.print(with_path("selection: ", path))
