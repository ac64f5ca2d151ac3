"""The ``opct-lab`` command: the paper's studies on opct (``opct-lab --help``).

``run`` a study file (one experiment per model family, then the pooled report), ``demo`` / ``demo-full`` the
paper's comparison on the organism with another rule's picks, picks chosen anew or over every family,
``select`` recipes on the validation split, ``report`` a study's pooled report, ``build-levels`` the weights of the
study's level organisms from their recipes. Every command runs in opct's
error boundary (exit 2 for bad input, 1 for a fault, tracebacks only with ``--debug``).
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group

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
    err_console,
    with_path,
)
from opct.cli.experiment import (
    DemoJobs,
    Jobs,
    log_line,
    print_settings,
    run_and_show,
    run_experiment_file,
)
from opct.config import ConfigError
from opct.experiments.files import read_extended
from opct.experiments.recipes import PICK_RULES
from opct.quiet import quiet_unless_verbose
from opct.report.selection import chosen_lines, selection_table
from opct.report.terminal import results_group
from opct.runs.experiment_layout import REPORT_HTML, REPORT_MD
from opct_lab.layout import StudyLayout
from opct_lab.level_builds import (
    SHIPPED_LEVELS,
    WEIGHTS,
    level_alias,
    level_checkpoint_path,
    pinned_weights_sha256,
    restore_level_build,
)
from opct_lab.report.study import study_group, study_renderables, write_study_report
from opct_lab.selection.per_family import select_per_family
from opct_lab.selection.run import candidate_configs, load_selection, run_selection
from opct_lab.study.config import chosen_families, load_study
from opct_lab.study.runner import resolve_study, run_study

#: The lab's study files and their selection evidence.
STUDIES = Path(str(files("opct_lab") / "studies"))
#: The library's quick demo, which the lab's demo studies extend.
DEMO = Path(str(files("opct") / "experiments" / "organism_demo.yaml"))

app = typer.Typer(cls=ErrorBoundary, add_completion=False, no_args_is_help=True,
                  help="The paper's studies on opct: multi-family studies, recipe selection, the mechanism study.")


@app.callback()
def _options(
    ctx: typer.Context,
    debug: DebugFlag = False,
    verbose: VerboseFlag = False,
) -> None:
    """The paper's studies on opct."""
    DEBUG["on"] = debug
    quiet_unless_verbose(ctx, verbose)


def _is_study_file(path: Path) -> bool:
    """Whether a YAML file is a study (it, or a file its ``extends:`` chain names, has ``families``)."""
    tree, _ = read_extended(path, "experiment")
    return "families" in tree


def run_study_file(config: Path, set_: list[str] | None, dry_run: bool, no_progress: bool, threads: int | None,
                   print_config: bool = False, jobs: int = 1, family: list[str] | None = None) -> None:
    """Run (or plan, or print the settings of) a study file; an experiment file runs as ``opct run`` runs it."""
    if not _is_study_file(config):
        if family:
            raise ConfigError(f"--family works on a study file (one with families:); {config} is an experiment")
        run_experiment_file(config, set_, dry_run, no_progress, threads, print_config=print_config, jobs=jobs)
        return
    study = load_study(config, set_ or [])
    chosen_families(study, family)  # an unknown --family fails before anything prints
    if print_config:
        resolve_study(study)  # every family's runs checked as opct train checks them (a misspelt key is refused)
        print_settings(study)
        return
    console.print(resolve_study(study).describe(), highlight=False, markup=False)
    if dry_run:
        return
    apply_threads(threads if threads is not None else study.threads)
    tables, report_file, also = study_group, REPORT_MD, "report.json; each family's own report in its folder"
    if family:  # some families alone: their own reports, no pooled one (run_study says so)
        def tables(root: Path, width: int) -> Group:
            return Group(*(results_group(StudyLayout(root).family(f).root, width) for f in family))

        report_file, also = f"{family[0]}/{REPORT_HTML}", "each chosen family's report.md in its folder"
    run_and_show(lambda: run_study(study, show_progress=not no_progress, log=log_line, jobs=jobs, only=family),
                 tables, study.root, report_file, also)


@app.command()
def run(
    study: Annotated[Path, typer.Argument(help="Study YAML (an experiment plus families:), or an experiment YAML.")],
    set_: SetOverrides = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved plan and exit.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
    print_config: Annotated[bool, typer.Option(
        "--print-config", help="Print the resolved settings (the extends: chain and --set applied) as YAML and exit.")] = False,
    jobs: Jobs = 1,
    family: Annotated[list[str] | None, typer.Option(
        "--family", metavar="NAME", help="Run this family alone (repeatable); each family's report is written, the "
        "pooled one waits for a run of the whole study, which resumes the finished families.")] = None,
) -> None:
    """Run a study: its experiment once per model family (each resumable as opct run's), then the pooled report."""
    run_study_file(study, set_, dry_run, no_progress, threads, print_config, jobs, family)


def _demo(full: bool, set_: list[str] | None, dry_run: bool, no_progress: bool, threads: int | None, reselect: bool,
          rule: str, compare_rules: bool, jobs: int) -> None:
    """The organism comparison (``full``: over its three families) with ``rule``'s picks, chosen anew with ``reselect``."""
    if rule not in PICK_RULES:
        raise ConfigError(f"--rule {rule!r}: use {', '.join(PICK_RULES)}")
    overrides = list(set_ or [])
    evidence = STUDIES / "organism_selection.json"
    if reselect and full:
        chosen = select_per_family(load_study(STUDIES / "organism_demo_full.yaml", overrides),
                                   STUDIES / "organism_selection.yaml", jobs=2, log=_err_line)
        overrides.append("family_picks=" + json.dumps({f: {"selection": str(p.resolve()), "rule": rule} for f, p in chosen.items()}))
        evidence = chosen[next(iter(chosen))].resolve()  # the shared picks: the first family's (every family has its own)
    elif reselect:
        evidence = run_selection(load_selection(STUDIES / "organism_selection.yaml"), jobs=2, log=_err_line).resolve()
    elif full and rule != "teacher_kl":
        overrides.append(f"pick_rule={rule}")
    if reselect or rule != "teacher_kl":
        picks = json.loads(evidence.read_text(encoding="utf-8"))["method_settings"]
        if rule not in picks:
            raise ConfigError(f"--rule {rule}: {evidence} holds no {rule} picks (it predates that rule); choose anew "
                              "with --reselect")
        overrides += [f"method_settings={json.dumps(picks[rule])}", f"selection={evidence}"]
    if compare_rules:
        overrides.append("compare_rules=true")
    if rule != "teacher_kl":
        overrides.append(f"name={'organism-demo-full' if full else 'organism-demo'}-{rule.replace('_', '-')}")
    if full:
        run_study_file(STUDIES / "organism_demo_full.yaml", overrides, dry_run, no_progress, threads, jobs=jobs)
    else:
        run_experiment_file(DEMO, overrides, dry_run, no_progress, threads, jobs=jobs)


def _err_line(line: str) -> None:
    err_console.print(line, highlight=False, markup=False)


Reselect = Annotated[bool, typer.Option("--reselect", help="Choose the recipes anew first (opct-lab select on "
                                        "organism_selection.yaml, resumable; with demo-full, once per model family) "
                                        "instead of the shipped picks.")]
Rule = Annotated[str, typer.Option(help="Whose picks train: teacher_kl (the default, as shipped), good_behaviour "
                                   "(method-neutral) or family_transfer (method-neutral, on held-back families); "
                                   "a rule other than teacher_kl gets its own output folder.")]
CompareRules = Annotated[bool, typer.Option("--compare-rules", help="Also train every other rule's pick where it "
                                            "differs (variants <method>-<rule>, side by side in the report).")]


@app.command()
def demo(
    set_: SetOverrides = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved plan and exit.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
    reselect: Reselect = False,
    rule: Rule = "teacher_kl",
    compare_rules: CompareRules = False,
    jobs: DemoJobs = "auto",  # type: ignore[assignment]  # jobs_count turns it into the core count
) -> None:
    """opct demo (the organism comparison) with another rule's picks, picks chosen anew, or every rule side by side."""
    _demo(False, set_, dry_run, no_progress, threads, reselect, rule, compare_rules, jobs)


@app.command("demo-full")
def demo_full(
    set_: SetOverrides = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved plan and exit.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
    reselect: Reselect = False,
    rule: Rule = "teacher_kl",
    compare_rules: CompareRules = False,
    jobs: DemoJobs = "auto",  # type: ignore[assignment]  # jobs_count turns it into the core count
) -> None:
    """The full comparison: 3 organism families x 3 seeds, then OPCT − BCT pooled with a verdict per metric (resumable)."""
    _demo(True, set_, dry_run, no_progress, threads, reselect, rule, compare_rules, jobs)


@app.command()
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
    cfg = load_selection(config, set_)
    runs = candidate_configs(cfg)
    if dry_run:
        for _cid, method, recipe, run_config in runs:
            console.print(f"{run_config.name}: {method} {recipe} -> {run_config.run_dir}", highlight=False, markup=False)
        console.print(f"{len(runs)} candidate runs; selection.json in {cfg.root}", markup=False)
        return
    apply_threads(threads if threads is not None else cfg.threads)
    path = run_selection(cfg, jobs=jobs, log=_err_line)
    selection = json.loads(path.read_text(encoding="utf-8"))
    console.print(selection_table(selection))
    for line in chosen_lines(selection):
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    console.print(with_path("selection: ", path))


@app.command()
def report(
    study_dir: Annotated[Path, typer.Argument(help="A study directory (runs/experiments/<name>, written by opct-lab run).")],
) -> None:
    """(Re)write a study's pooled report.md and report.json and print its tables, ending with the verdict block."""
    layout = StudyLayout(study_dir)
    if not layout.is_study():
        raise ConfigError(f"{study_dir} is not a study (no {layout.study.name}): opct-lab report reads a study folder "
                          "written by opct-lab run; an experiment's report is opct report's")
    data = write_study_report(study_dir)
    console.print(with_path("report: ", layout.report_md, " (and report.json)"))
    console.print(Group(*study_renderables(data, console.width)))  # last: ending with the verdict block


@app.command("build-levels")
def build_levels(
    level: Annotated[list[str] | None, typer.Option(
        "--level", metavar="ARCH-LEVEL", help="Only these shipped builds (llama-w4-long); repeatable. Default: all.")] = None,
) -> None:
    """Put the weights of the study's shipped level organisms in place: from the repository's history (seconds),
    else built from their recipes (9–39 min each on 2 cores), each kept only if it is byte for byte the weights
    their picks were selected on; a no-op for those already in place."""
    shipped = {f"{arch}-{lv}": (arch, lv) for arch, lv in SHIPPED_LEVELS}
    unknown = sorted(set(level or ()) - set(shipped))
    if unknown:
        raise ConfigError(f"--level {', '.join(unknown)}: not a shipped level build; choose from {', '.join(shipped)}")
    for name in level or list(shipped):
        arch, lv = shipped[name]
        state = restore_level_build(arch, lv, log=_err_line)
        console.print(f"{level_alias(arch, lv)}: {state} ({level_checkpoint_path(arch, lv) / WEIGHTS}, sha256 "
                      f"{pinned_weights_sha256(arch, lv)[:12]})", highlight=False, markup=False, soft_wrap=True)
