"""``opct eval``: evaluate one model on the registered axes."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from opct.axes import DataView, axes_with
from opct.cli.boundary import (
    NoProgress,
    SetOverrides,
    Threads,
    _fail,
    apply_threads,
    console,
    print_problem,
    with_path,
)
from opct.config import parse_overrides
from opct.evals.config import load_eval_config
from opct.judges import JudgeOutage


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


def with_real_data_flags(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with one ``--<key>`` flag per real-data key an axis offers on the command line
    (:attr:`opct.evals.axis_views.DataView.cli_options`, every registered axis in order), after ``--data-dir``;
    the values reach ``command`` as its ``real_paths`` mapping."""
    offered = [(key, text) for _, data in axes_with(DataView) for key, text in data.cli_options.items()]
    params = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "real_paths"]
    at = next(i for i, p in enumerate(params) if p.name == "data_dir") + 1
    flags = [inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation=Annotated[str | None, typer.Option(help=text)]) for key, text in offered]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]

    @functools.wraps(command)
    def run(**options: Any) -> None:
        command(real_paths={key: options.pop(key) for key, _ in offered}, **options)

    run.__signature__ = inspect.Signature([*params[:at], *flags, *params[at:]])  # type: ignore[attr-defined]
    del run.__wrapped__  # typer reads the signature above, not the command's own
    return run


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
    judge: Annotated[str | None, typer.Option(help="'rule' (default) or 'http:<model>' (OpenAI-compatible; OPCT_JUDGE_BASE_URL).")] = None,
    judge_timeout: Annotated[float | None, typer.Option(
        help="Model judges: seconds one attempt may take, connect to last byte (default 15); a request with its "
             "retries gets at most timeout x (retries + 1). The defaults stop a silent judge within 45 s.")] = None,
    judge_retries: Annotated[int | None, typer.Option(help="Model judges: retries of a failed attempt (default 2).")] = None,
    judge_fail_after: Annotated[int | None, typer.Option(
        help="Model judges: stop after this many failed attempts in a row (timeouts, HTTP 429/5xx; default 3); "
             "records written so far are kept.")] = None,
    reasoning: Annotated[str | None, typer.Option(help="strip (default): drop <think> blocks before parsing and judging; keep.")] = None,
    max_unscored: Annotated[float | None, typer.Option(help="Share of unscored records (empty, truncated, unparsed, judge abstained, error) "
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
    trust_remote_code: Annotated[bool | None, typer.Option(
        "--trust-remote-code", help="Allow the model's own code (a checkpoint's files never turn it on).")] = None,
    no_progress: NoProgress = False,
    threads: Threads = None,
    real_paths: dict[str, str | None] | None = None,
) -> None:
    """Evaluate a model on the safety axes and capability; per-sample records and results.json per eval.

    Settings come from --config FILE (an EvalConfig: model, evals, splits, data, real paths, judge, limit,
    seed, out, device, dtype, generation), then the flags, then --set key=value.
    """
    # deferred: loads torch and transformers only when called
    from opct.evals.suite import eval_tasks, evaluate, incomplete, results_table

    flags = {"model": model, "evals": evals, "split": split, "out": out, "data": data, "data_dir": data_dir,
             **(real_paths or {}), "judge": judge, "judge_timeout": judge_timeout, "judge_retries": judge_retries,
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
        print_problem("skipped:", why, "yellow")

    apply_threads(threads if threads is not None else cfg.threads)
    try:
        results = evaluate(cfg.model, tasks, cfg.out, cfg.generation, seed=cfg.seed, reasoning=cfg.reasoning,
                           max_unscored=cfg.max_unscored, show_progress=not no_progress)
    except JudgeOutage as err:  # says where the records already judged are
        _fail(f"{err}\nThe records judged so far are kept in {cfg.out}; rerun the same command to continue.", code=1)
    console.print(results_table(results, title=escape(f"{cfg.model.name_or_path} ({', '.join(cfg.splits)})")))
    console.print(with_path("records and results.json per eval in ", cfg.out))
    bad = incomplete(results)
    if bad:
        for line in bad:
            print_problem("incomplete:", line)
        if not cfg.allow_unscored:
            _fail("some evals are incomplete: their numbers are not a measurement of the model. See the records "
                  f"in {cfg.out}/<eval>/samples.jsonl (field 'outcome'); --allow-unscored exits 0 anyway.", code=1)
