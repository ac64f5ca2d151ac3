"""The ``opct`` command line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group

from opct.cli_attack import attack
from opct.cli_common import (
    DEBUG,
    ErrorBoundary,
    NoProgress,
    SetOverrides,
    Threads,
    _fail,
    apply_threads,
    console,
    err_console,
)
from opct.cli_env import env, version_callback
from opct.cli_pairs import pairs_app

app = typer.Typer(cls=ErrorBoundary, add_completion=False, no_args_is_help=True,
                  help="On-Policy Consistency Training for Hugging Face causal LMs.")


@app.callback()
def _options(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of an error (also OPCT_DEBUG=1).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Keep the libraries' own logs, progress bars and warnings "
                                          "(also OPCT_VERBOSE=1).")] = False,
    version: Annotated[bool, typer.Option("--version", callback=version_callback, is_eager=True,
                                          help="Print opct's version and exit.")] = False,
) -> None:
    """On-Policy Consistency Training for Hugging Face causal LMs."""
    from opct.quiet import quiet_unless_verbose

    DEBUG["on"] = debug
    quiet_unless_verbose(ctx, verbose)


def _organism_app() -> typer.Typer:
    from opct.organism.cli import organism_app

    return organism_app


app.add_typer(_organism_app(), name="organism")

app.add_typer(pairs_app, name="pairs")


@app.command()
def train(
    config: Annotated[Path | None, typer.Option("--config", "-c", metavar="FILE", help="YAML run configuration.")] = None,
    set_: SetOverrides = None,
    no_progress: NoProgress = False,
    print_config: Annotated[bool, typer.Option("--print-config", help="Print the resolved configuration and exit.")] = False,
    allow_heldout_training: Annotated[bool, typer.Option(
        "--allow-heldout-training", help="Train on pairs marked held-out (meta.split: heldout); refused by default.")] = False,
    threads: Threads = None,
) -> None:
    """Train with OPCT or BCT; rerunning the same command resumes an interrupted run."""
    import yaml

    from opct.config import dump_config, load_config

    # every error reaches ErrorBoundary (opct/cli_common.py), which prints it and picks the exit code
    overrides = [*(set_ or []), *(["data.allow_heldout_training=true"] if allow_heldout_training else [])]
    cfg = load_config(config, overrides)
    if print_config:
        console.print(yaml.safe_dump(dump_config(cfg), sort_keys=False), highlight=False)
        return
    apply_threads(threads if threads is not None else cfg.threads)
    from opct.train import train as run_training

    result = run_training(cfg, show_progress=not no_progress)
    if result.is_main_process:
        console.print(f"done: {result.steps} steps; checkpoint in [bold]{result.final_dir}[/]")


def _run_experiment(
    config: Path | None, set_: list[str] | None, dry_run: bool, no_progress: bool, threads: int | None = None
) -> None:
    """``opct run``/``demo``: an experiment or a study; ``threads`` (the flag) over the file's ``threads:``."""
    from opct.experiment import load_experiment, resolve, run_experiment
    from opct.study import is_study_file

    if config is not None and is_study_file(config):
        _run_study(config, set_, dry_run, no_progress, threads)
        return
    cfg = load_experiment(config, set_ or [])
    plan = resolve(cfg)
    console.print(plan.describe(), highlight=False)
    if dry_run:
        return
    apply_threads(threads if threads is not None else cfg.threads)
    from opct.report.terminal import results_group

    _run_and_show(lambda: run_experiment(cfg, show_progress=not no_progress, log=_log_line), results_group,
                  cfg.root, "report.html", "report.md")


def _run_study(config: Path, set_: list[str] | None, dry_run: bool, no_progress: bool, threads: int | None) -> None:
    from opct.report.study import REPORT_MD, study_group
    from opct.study import load_study, resolve_study, run_study

    study = load_study(config, set_ or [])
    console.print(resolve_study(study).describe(), highlight=False)
    if dry_run:
        return
    apply_threads(threads if threads is not None else study.threads)
    _run_and_show(lambda: run_study(study, show_progress=not no_progress, log=_log_line), study_group,
                  study.root, REPORT_MD, "report.json; each family's own report in its folder")


def _log_line(message: str) -> None:
    """A progress line of a run, printed as written (``[stage]`` is text, not rich markup)."""
    console.print(message, highlight=False, markup=False)


def _run_and_show(run: Callable[[], Path], tables: Callable[[Path, int], Any], root: Path, report: str, also: str) -> None:
    """Run an experiment or a study, then print its result tables and where its report is; when an
    eval is incomplete, the tables first (they show which), then the error with exit code 1."""
    from opct.experiment import IncompleteEvalError

    try:
        run()
    except IncompleteEvalError as err:
        console.print(tables(root, console.width))
        _fail(str(err), code=1)
    console.print(tables(root, console.width))
    console.print(f"report: [bold]{root / report}[/] (and {also})")


@app.command()
def run(
    experiment: Annotated[Path, typer.Argument(help="Experiment YAML (model, axes, methods, seeds, settings).")],
    set_: SetOverrides = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved plan and exit.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
) -> None:
    """Run an experiment: base eval, training per method, evaluation, attack, report (resumable). A study
    file (one with families:) runs its experiment once per family, then the pooled report."""
    _run_experiment(experiment, set_, dry_run, no_progress, threads)


@app.command()
def demo(
    set_: SetOverrides = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved plan and exit.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
    full: Annotated[bool, typer.Option("--full", help="The full comparison: 3 organism families x 3 seeds, "
                                       "then OPCT − BCT pooled with a verdict per metric (resumable).")] = False,
) -> None:
    """The paper's comparison on the built-in organism: baseline vs BCT vs OPCT on all three axes."""
    from importlib.resources import files

    name = "organism_demo_full.yaml" if full else "organism_demo.yaml"
    _run_experiment(Path(str(files("opct") / "experiments" / name)), set_, dry_run, no_progress, threads)


@app.command()
def report(
    experiment_dir: Annotated[Path, typer.Argument(
        help="An experiment or study directory (runs/experiments/<name>), or Inspect logs of opct's tasks "
             "(a .eval file or a folder of them).")],
) -> None:
    """(Re)write an experiment's report.html and report.md and print its table and the paired differences
    between every two methods; for a study, its pooled report.md and report.json; for Inspect logs of
    opct's tasks (inspect eval opct/<axis>), opct's results table recomputed from their records."""
    from opct.report import write_report
    from opct.report.terminal import results_group
    from opct.study import is_study_dir

    if experiment_dir.suffix in (".eval", ".json") or (experiment_dir.is_dir() and any(experiment_dir.glob("*.eval"))):
        from opct.inspect_eval.logs import is_inspect_log_path, report_renderables

        if is_inspect_log_path(experiment_dir):
            console.print(Group(*report_renderables(experiment_dir)))
            return
    if is_study_dir(experiment_dir):
        from opct.report.study import REPORT_MD, study_renderables, write_study_report

        console.print(Group(*study_renderables(write_study_report(experiment_dir), console.width)))
        console.print(f"report: [bold]{experiment_dir / REPORT_MD}[/] (and report.json)")
        return
    html, _ = write_report(experiment_dir)
    console.print(results_group(experiment_dir, console.width))
    console.print(f"report: [bold]{html}[/] (and report.md)")


def _eval_overrides(flags: dict[str, object]) -> list[tuple[str, object]]:
    """``opct eval`` flags given on the command line, as ``(config key, value)`` overrides."""
    keys = {"model": "model.name_or_path", "out": "out", "data": "data", "data_dir": "data_dir", "judge": "judge",
            "reasoning": "reasoning", "max_unscored": "max_unscored", "allow_unscored": "allow_unscored",
            "judge_timeout": "judge_timeout", "judge_retries": "judge_retries", "judge_fail_after": "judge_fail_after",
            "limit": "limit", "seed": "seed", "dtype": "model.dtype", "device": "model.device",
            "revision": "model.revision", "chat_template": "model.chat_template", "system_prompt": "model.system_prompt",
            "trust_remote_code": "model.trust_remote_code", "n": "generation.n", "temperature": "generation.temperature",
            "max_new_tokens": "generation.max_new_tokens", "sequences_per_call": "generation.sequences_per_call"}
    out: list[tuple[str, object]] = []
    for flag, value in flags.items():
        if value is None:
            continue
        if flag in ("evals", "split"):
            out.append(("evals" if flag == "evals" else "splits", [v.strip() for v in str(value).split(",") if v.strip()]))
        elif flag in keys:
            out.append((keys[flag], str(value) if isinstance(value, Path) else value))
        else:
            out.append((f"real.{flag}", value))
    return out


app.command()(attack)


@app.command("eval")
def eval_(
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", metavar="FILE", help="YAML eval configuration (flags and --set override it).")] = None,
    set_: SetOverrides = None,
    model: Annotated[str | None, typer.Option(help="'organism' (default), a hub id, a model folder, a run directory or its final/.")] = None,
    evals: Annotated[str | None, typer.Option(help="Comma-separated registered axes (default: all, e.g. sycophancy,jailbreak,awareness,capability).")] = None,
    split: Annotated[str | None, typer.Option(help="Perturbation split(s): heldout (default), train, or heldout,train.")] = None,
    out: Annotated[Path | None, typer.Option(metavar="DIR", help="Output folder (resumable; default runs/eval).")] = None,
    data: Annotated[str | None, typer.Option(help="'organism' (default: its world, exact judges) or 'real' (benchmark files).")] = None,
    data_dir: Annotated[Path | None, typer.Option(metavar="DIR", help="Folder with gpqa-diamond/, math-500/, ifeval/, sageeval-test/.")] = None,
    mmlu: Annotated[str | None, typer.Option(help="MMLU-style multiple choice file (capability).")] = None,
    sycophancy_mc: Annotated[str | None, typer.Option(help="Multiple-choice file to build sycophancy prompts from.")] = None,
    behaviors: Annotated[str | None, typer.Option(help="Harmful behaviours (AdvBench/HarmBench CSV, JSONL, text).")] = None,
    wrappers: Annotated[str | None, typer.Option(help="Jailbreak wrapper templates (YAML/JSON/text with {request}).")] = None,
    benign: Annotated[str | None, typer.Option(help="Benign alarming-looking requests (over-refusal).")] = None,
    judge: Annotated[str | None, typer.Option(help="'rule' (default) or 'http:<model>' (OpenAI-compatible; OPCT_JUDGE_BASE_URL).")] = None,
    judge_timeout: Annotated[float | None, typer.Option(help="Model judges: seconds per request (default 60).")] = None,
    judge_retries: Annotated[int | None, typer.Option(help="Model judges: retries of a failed request (default 4).")] = None,
    judge_fail_after: Annotated[int | None, typer.Option(
        help="Model judges: stop after this many failed requests in a row (default 5); records written so far are kept.")] = None,
    reasoning: Annotated[str | None, typer.Option(help="strip (default): drop <think> blocks before parsing and judging; keep.")] = None,
    max_unscored: Annotated[float | None, typer.Option(help="Share of unscored records (empty, unparsed, judge abstained, error) "
                                                             "above which an eval is incomplete (default 0.05).")] = None,
    allow_unscored: Annotated[bool | None, typer.Option("--allow-unscored", help="Exit 0 even when an eval is incomplete.")] = None,
    limit: Annotated[int | None, typer.Option(help="Evaluate at most this many items per benchmark (seeded sample).")] = None,
    n: Annotated[int | None, typer.Option(help="Samples per prompt (default 1).")] = None,
    temperature: Annotated[float | None, typer.Option(help="0 = greedy (default).")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(help="Longest answer (default 512; organism tasks stop at 48).")] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    sequences_per_call: Annotated[int | None, typer.Option(help="Sequences per generate() call (default 64; memory, not results).")] = None,
    dtype: Annotated[str | None, typer.Option(help="float32 (default; a run's own dtype for a trained checkpoint), bfloat16, float16 or auto.")] = None,
    device: Annotated[str | None, typer.Option(help="Device (default: the first GPU, else CPU).")] = None,
    revision: Annotated[str | None, typer.Option(help="Hub revision of the model.")] = None,
    chat_template: Annotated[str | None, typer.Option(help="Jinja chat template (text or .jinja file) for a model without one.")] = None,
    system_prompt: Annotated[str | None, typer.Option(help="System message before every prompt (a trained run's own by default).")] = None,
    trust_remote_code: Annotated[bool | None, typer.Option("--trust-remote-code", help="Allow the model's own code.")] = None,
    no_progress: NoProgress = False,
    threads: Threads = None,
) -> None:
    """Evaluate a model on the safety axes and capability; per-sample records and results.json per eval.

    Settings come from --config FILE (an EvalConfig: model, evals, splits, data, real paths, judge, limit,
    seed, out, device, dtype, generation), then the flags, then --set key=value.
    """
    from opct.config import parse_overrides
    from opct.evals.config import load_eval_config
    from opct.evals.suite import eval_tasks, evaluate, incomplete, results_table

    flags = {"model": model, "evals": evals, "split": split, "out": out, "data": data, "data_dir": data_dir,
             "mmlu": mmlu, "sycophancy_mc": sycophancy_mc, "behaviors": behaviors, "wrappers": wrappers, "benign": benign,
             "judge": judge, "judge_timeout": judge_timeout, "judge_retries": judge_retries,
             "judge_fail_after": judge_fail_after, "reasoning": reasoning, "max_unscored": max_unscored, "allow_unscored": allow_unscored,
             "limit": limit, "n": n, "temperature": temperature, "max_new_tokens": max_new_tokens,
             "seed": seed, "sequences_per_call": sequences_per_call, "dtype": dtype, "device": device,
             "revision": revision, "chat_template": chat_template, "system_prompt": system_prompt,
             "trust_remote_code": trust_remote_code}
    cfg = load_eval_config(config, _eval_overrides(flags) + parse_overrides(set_ or []))
    skipped: list[str] | None = None if "evals" in cfg.model_fields_set else []
    tasks = eval_tasks(cfg.evals, cfg, suffix_train=len(cfg.splits) > 1, skipped=skipped)
    if not tasks:
        _fail("nothing to evaluate: give benchmark paths (e.g. --data-dir ../shared/data) or use --data organism")
    for why in skipped or []:
        err_console.print(f"[yellow]skipped:[/] {why}", highlight=False, soft_wrap=True)
    from opct.judges import JudgeOutage

    apply_threads(threads if threads is not None else cfg.threads)
    try:
        results = evaluate(cfg.model, tasks, cfg.out, cfg.generation, seed=cfg.seed, reasoning=cfg.reasoning,
                           max_unscored=cfg.max_unscored, show_progress=not no_progress)
    except JudgeOutage as err:  # says where the records already judged are
        _fail(f"{err}\nThe records judged so far are kept in {cfg.out}; rerun the same command to continue.", code=1)
    console.print(results_table(results, title=f"{cfg.model.name_or_path} ({', '.join(cfg.splits)})"))
    console.print(f"records and results.json per eval in [bold]{cfg.out}[/]")
    bad = incomplete(results)
    if bad:
        for line in bad:
            err_console.print(f"[bold red]incomplete:[/] {line}", highlight=False, soft_wrap=True)
        if not cfg.allow_unscored:
            _fail("some evals are incomplete: their numbers are not a measurement of the model. See the records "
                  f"in {cfg.out}/<eval>/samples.jsonl (field 'outcome'); --allow-unscored exits 0 anyway.", code=1)


@app.command()
def export(
    model: Annotated[str, typer.Argument(metavar="RUN", help="A run directory or its final/.")],
    out: Annotated[Path, typer.Option(metavar="DIR", help="The folder to write (outside final/).")],
    dtype: Annotated[str | None, typer.Option(help="float32, bfloat16, float16 or auto (default: the run's own).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace DIR if it exists.")] = False,
) -> None:
    """Write a trained checkpoint as one model folder (a LoRA adapter merged into its base, base weights
    checked): loadable by any Hugging Face tool, e.g. lm-eval-harness's --model hf pretrained=DIR."""
    from opct.export import export_merged

    folder = export_merged(model, out, dtype=dtype, overwrite=overwrite)
    console.print(f"exported to [bold]{folder}[/]")


app.command()(env)


def main() -> None:  # pragma: no cover - entry point
    app(prog_name="opct")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
