"""Build the requested evaluation tasks from the registered axes and run them on one model.

Two data sources: the organism's world (exact judges, the default for the organism and models
trained from it) and real benchmark files given by path (rule or model judges). Every axis builds
its own tasks (:meth:`opct.evals.contract.Axis.tasks`); this module only iterates :data:`~opct.evals.axis_registry.AXES`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opct.config import GenerationConfig, ModelConfig
from opct.errors import OpctError
from opct.evals.axis_registry import AXES
from opct.evals.axis_views import data_view
from opct.evals.config import EvalOptions
from opct.evals.contract import EvalTask, TaskContext, check_token_limit
from opct.evals.identity import stale_reason, task_identity
from opct.evals.outcomes import DEFAULT_MAX_UNSCORED, describe_unscored
from opct.evals.records import EvalOutputError
from opct.evals.runner import run_task
from opct.models import inference_spec, load_spec_for_inference, weights_fingerprint
from opct.runs.atomic import write_json_atomic
from opct.runs.experiment_layout import EvalFolder
from opct.runs.manifest import build_manifest
from opct.runs.outputs import check_output, output_lock
from opct.sampling.engine import SamplingParams
from opct.sampling.hf_sampler import HFSampler


def build_tasks(
    evals: Sequence[str],
    source: str,
    split: str,
    real: Mapping[str, str] | None = None,
    judge: str = "rule",
    limit: int | None = None,
    world_seed: int | None = None,
    templates: Mapping[str, str] | None = None,
    judge_options: Any = None,
) -> list[EvalTask]:
    """Tasks of the axes ``evals`` (registered names) on ``split`` from ``source`` (``organism`` or ``real``);
    ``templates`` names another template set for an axis (see :class:`~opct.evals.contract.TaskContext`)."""
    if source not in ("organism", "real"):
        raise ValueError(f"unknown data source {source!r}; use 'organism' or 'real'")
    tasks = []
    for name in evals:
        ctx = _JudgeRecordingContext(split, source, limit, dict(real or {}), judge, world_seed, dict(templates or {}),
                                     judge_options)
        built = AXES.get(name).tasks(ctx)
        if source == "real" and ctx.roles:  # the judge spec is part of these results' identity
            for task in built:
                task.judge = judge
        tasks.extend(built)
    return tasks


@dataclass(frozen=True)
class _JudgeRecordingContext(TaskContext):
    """A task context that notes the judge roles an axis asks for (an axis without judges: none)."""

    roles: list[str] = field(default_factory=list)

    def make_judge(self, role: str) -> Any:
        self.roles.append(role)
        return super().make_judge(role)


class MissingEvalData(OpctError, ValueError):
    """An eval was asked for but its data files were not given."""


def _check_data(evals: Sequence[str], options: EvalOptions, real: Mapping[str, str], skipped: list[str] | None) -> list[str]:
    """The evals of ``evals`` that can be built from ``options``; an eval without its real data files is
    an error (:class:`MissingEvalData`), or, when ``skipped`` is a list, noted there and left out."""
    if options.data != "real":
        return list(evals)
    keep = []
    for name in evals:
        data = data_view(AXES.get(name))
        keys = list(data.real_data)
        if not keys or any(real.get(k) for k in keys):
            keep.append(name)
            continue
        # a key with an opct eval flag of its own is named by its flag, the others by their key
        ways = [f"--{k.replace('_', '-')} FILE (real.{k})" if k in data.cli_options else f"real.{k}" for k in keys]
        in_dir = [data.data_dir_layout[k] for k in keys if k in data.data_dir_layout]
        why = (f"eval {name!r} needs real data: give {' or '.join(ways)}"
               + (f", or --data-dir DIR holding {', '.join(in_dir)}/" if in_dir else ""))
        if skipped is None:
            raise MissingEvalData(why)
        skipped.append(why)
    return keep


def eval_tasks(
    evals: Sequence[str], options: EvalOptions, *, suffix_train: bool, skipped: list[str] | None = None
) -> list[EvalTask]:
    """Every task of ``evals`` for each of ``options.splits``; axes whose tasks do not depend on the split
    (capability) once, after the others when there are several splits.

    A task on the training split is renamed ``<name>_train`` when ``suffix_train`` is true (experiments;
    ``opct eval`` with several splits). On real data, an eval whose files are not given is an error
    (:class:`MissingEvalData`) unless ``skipped`` is a list: then the reason is appended there and the
    eval left out (``opct eval`` without ``--evals``: every axis that has data).
    """
    real = options.real_paths()
    evals = _check_data(evals, options, real, skipped)
    per_split = [e for e in evals if AXES.get(e).per_split]
    once = [e for e in evals if not AXES.get(e).per_split]

    def build(names: Sequence[str], split: str) -> list[EvalTask]:  # each eval with its own item limit
        return [task for name in names
                for task in build_tasks([name], options.data, split, real, options.judge, options.limit_for(name),
                                        templates=options.templates, judge_options=options.judge_options())]

    if len(options.splits) == 1 and not suffix_train:
        return build(evals, options.splits[0])
    tasks = []
    for split in options.splits:
        built = build(per_split, split)
        if split == "train":
            for t in built:
                t.name = f"{t.name}_train"
        tasks.extend(built)
    return tasks + build(once, options.splits[0])


def evaluate(
    model: ModelConfig | str,
    tasks: list[EvalTask],
    out_dir: str | Path,
    generation: GenerationConfig | None = None,
    seed: int = 0,
    show_progress: bool = True,
    reasoning: str = "strip",
    max_unscored: float = DEFAULT_MAX_UNSCORED,
    discard_stale: bool = False,
) -> dict[str, Any]:
    """Run ``tasks`` on one model; returns ``{task: EvalResult}`` and writes a manifest beside them.

    ``model`` is a model spec (or its name): a trained checkpoint is rendered with the settings it
    was trained with (:func:`opct.models.inference_spec`), on ``model.device`` (default: a GPU if any).
    ``reasoning`` (``strip`` / ``keep``) and ``max_unscored`` are :func:`opct.evals.runner.run_task`'s.

    ``out_dir`` belongs to one model, by the sha256 of the weights it measured (a LoRA checkpoint's
    adapter merged into its base), and to one process at a time (an ``flock``). A folder that belongs
    to something else (a run, an attack, an experiment, another model's eval) is refused
    (:class:`~opct.runs.outputs.OutputOwnedError`, :class:`EvalOutputError`), and so are records
    measured with other settings, unless ``discard_stale`` (experiments): then the stale results are
    deleted and measured again. Nothing is written into the checkpoint measured: the table for its
    model card is ``<out>/model_card_eval.md`` (:data:`MODEL_CARD_EVAL`).
    """
    g = generation or GenerationConfig()
    check_token_limit(tasks, g.max_new_tokens)  # before the model loads
    out = Path(out_dir)
    check_output(out, "eval", "--out")
    spec = inference_spec(model)
    model_spec = spec.name_or_path
    loaded, tokenizer, renderer = load_spec_for_inference(spec)
    weights = weights_fingerprint(loaded)
    engine = HFSampler(loaded, tokenizer, batch_size=g.sequences_per_call)
    params = SamplingParams.from_config(g, seed=seed)
    identity = {"weights_sha256": weights,
                "rendering": {"template_kwargs": renderer.template_kwargs, "system_prompt": renderer.system_prompt}}
    with output_lock(out, "this eval"):
        _claim_output(out, model_spec, weights, discard_stale)
        stale = [why for t in tasks if (why := stale_reason(out / t.name, task_identity(t, params, model_spec, identity,
                                                                                          reasoning)))]
        if stale and not discard_stale:
            raise EvalOutputError(f"{out} holds results of {model_spec} measured otherwise: {'; '.join(stale)}. Use another "
                                  f"--out, or delete {out} to measure them again.")
        write_json_atomic(
            out / "manifest.json",
            build_manifest(
                "eval",
                {"model": model_spec, "model_spec": spec.model_dump(mode="json"), "tasks": [t.name for t in tasks],
                 **g.model_dump(), "seed": seed, "reasoning": reasoning, "max_unscored": max_unscored},
                data_hashes={t.name: t.data_hash() for t in tasks},
                weights_sha256=weights,
            ),
        )
        results = {}
        with _progress(show_progress) as bar:
            for task in tasks:
                tid = bar.add_task(task.name, total=len(task.units)) if bar else None

                def report(done: int, total: int, tid: Any = tid) -> None:
                    if bar is not None:
                        bar.update(tid, completed=done, total=total)

                results[task.name] = run_task(task, engine, tokenizer, out, params, model_spec, identity, renderer=renderer,
                                              batch_units=g.sequences_per_call, progress=report, reasoning=reasoning,
                                              max_unscored=max_unscored, discard_stale=discard_stale)
        (out / MODEL_CARD_EVAL).write_text(model_card_evaluation(model_spec, weights, results), encoding="utf-8")
    return results


#: The eval's table as the Evaluation section of the measured checkpoint's model card (evaluation
#: never writes into the checkpoint it measures; publish the section by pasting it into the card).
MODEL_CARD_EVAL = "model_card_eval.md"


def _claim_output(out: Path, model_spec: str, weights: str, discard_stale: bool) -> None:
    """Refuse an eval folder whose results belong to other weights (they would be overwritten), or, with
    ``discard_stale``, delete them (their task folders, manifest and model card section)."""
    owner = check_output(out, "eval", "--out")
    if owner is None or not owner.weights or owner.weights == weights:
        return
    if not discard_stale:
        raise EvalOutputError(
            f"{out} holds the results of {owner.model or '?'} (weights {owner.weights}); {model_spec} has weights "
            f"{weights}. Use another --out, or delete {out} to start over."
        )
    for part in out.iterdir():
        if EvalFolder(out).holds_eval(part):
            shutil.rmtree(part)
    (out / MODEL_CARD_EVAL).unlink(missing_ok=True)


def model_card_evaluation(model_spec: str, weights: str, results: dict[str, Any]) -> str:
    """The ``## Evaluation`` section of a model card for these results (Markdown): what was measured,
    on which weights, and one row per (eval, metric); an incomplete eval is marked INCOMPLETE."""
    rows = ["| eval | metric | value | 95% interval | n | unscored |", "|---|---|---|---|---|---|"]
    for name, res in results.items():
        label = name if res.status == "ok" else f"{name} (INCOMPLETE)"
        for metric, est in res.metrics.items():
            shown = ("n = 0", "") if est.value != est.value else (f"{est.value:.3f}", f"[{est.ci_low:.3f}, {est.ci_high:.3f}]")
            rows.append(f"| {label} | {metric} | {shown[0]} | {shown[1]} | {est.n} | {unscored_text(res) or '0'} |")
    head = (f"`opct eval` of `{model_spec}` (weights sha256 `{weights}`), {time.strftime('%Y-%m-%d')}; records and "
            "results.json per eval beside this file.")
    return "\n".join(["## Evaluation", "", head, "", *rows, ""])


class _Quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(enabled: bool):
    if not enabled:
        return _Quiet()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())


def unscored_text(result: Any) -> str:
    """``"3 empty, 1 abstained of 120"`` for an eval with unscored records, else ``""``."""
    text = describe_unscored(result.outcomes or {}, result.unscored_classes)
    return f"{text} of {result.n_records}" if text else ""


def incomplete(results: dict[str, Any]) -> list[str]:
    """One line per eval whose unscored share exceeds its limit (empty when every eval is complete)."""
    return [
        f"{name}: {res.unscored}/{res.n_records} records unscored ({unscored_text(res)}), over the "
        f"{res.max_unscored:.0%} limit" if res.n_records else f"{name}: no records"
        for name, res in results.items() if res.status != "ok"
    ]


def results_table(results: dict[str, Any], title: str = "results"):
    """A rich table: one row per (task, metric) with value, 95% interval, n and the unscored records;
    an incomplete eval is marked INCOMPLETE on every row, a metric with nothing scored reads ``n = 0``.
    Eval and metric names wrap, never cut, however narrow the terminal."""
    from rich.table import Table

    table = Table(title=title)
    cols = (("eval", "left"), ("metric", "left"), ("value", "right"), ("95% CI", "right"), ("n", "right"),
            ("unscored", "left"))
    for col, justify in cols:  # names wrap (fold), never cut with an ellipsis; numbers are kept whole
        table.add_column(col, justify=justify, overflow="fold" if col in ("eval", "metric", "unscored") else "ellipsis",
                         no_wrap=col in ("value", "95% CI", "n"))
    for name, res in results.items():
        label = name if res.status == "ok" else f"{name} [bold red]INCOMPLETE[/]"
        unscored = unscored_text(res)
        if not res.metrics:
            table.add_row(label, "—", "—", "—", "0", unscored)
        for metric, est in res.metrics.items():
            if est.value != est.value:  # nan: nothing scored for this metric
                table.add_row(label, metric, "n = 0" if not est.n else "not a number", "", str(est.n), unscored)
                continue
            table.add_row(label, metric, f"{est.value:.3f}", f"[{est.ci_low:.3f}, {est.ci_high:.3f}]", str(est.n), unscored)
    return table
