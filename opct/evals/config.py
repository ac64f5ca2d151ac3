"""Evaluation settings: ``opct eval --config FILE`` (:class:`EvalConfig`) and an experiment's ``eval:``.

Both share :class:`EvalOptions` (data source and splits, real-data paths, judge, item limit, seed,
and generation as :class:`opct.config.GenerationConfig`). Unknown keys are errors that name them,
and so are unknown eval names and real-data keys (the axes registered in :data:`~opct.evals.axis_registry.AXES`
say which exist).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from opct.config import (
    AnyValue,
    CheckedBy,
    DeclaredRanges,
    GenerationConfig,
    ModelConfig,
    parse_overrides,
    read_config_file,
    set_dotted,
    validate_config,
)
from opct.evals.axis_registry import AXES, axes_with
from opct.evals.axis_views import DataView, data_view
from opct.judges import JudgeOptions

#: Where ``data_dir`` keeps each real benchmark (the layout of ``../shared/data``).


class _Strict(DeclaredRanges):
    model_config = ConfigDict(extra="forbid")


def data_dir_layout() -> dict[str, str]:
    """The real-data keys a ``--data-dir`` folder holds, with their subfolder, from every registered
    axis (:attr:`opct.evals.axis_views.DataView.data_dir_layout`)."""
    return {key: folder for _, data in axes_with(DataView) for key, folder in data.data_dir_layout.items()}


def real_data_keys() -> dict[str, str]:
    """Every real-data path key a registered axis reads, with its help line."""
    return {key: help_ for _, data in axes_with(DataView) for key, help_ in data.real_data.items()}


#: An item limit: at least 1, checked (and worded per eval name) by ``EvalOptions._positive_known_limits``.
_Limit = Annotated[int, CheckedBy("at least 1", "_positive_known_limits")]


class EvalOptions(_Strict):
    """How models are evaluated (shared by ``opct eval`` and experiments)."""

    data: Literal["organism", "real"] = Field("organism", description="organism: its world, exact judges; real: files")
    splits: list[Literal["heldout", "train"]] = Field(default_factory=lambda: ["heldout"], min_length=1, description="perturbation families evaluated: heldout (never trained on), train")
    real: dict[str, str] = Field(default_factory=dict, description="real-data paths by key (sycophancy_mc, behaviors, sage, gpqa...)")
    data_dir: str | None = Field(None, description="folder with gpqa-diamond/, math-500/, ifeval/, sageeval-test/")
    judge: str = Field("rule", description="real-data judges: rule or http:<model>")
    judge_timeout: float = Field(15.0, gt=0.0, description="model judges: seconds one attempt may take, connect to last byte")
    judge_retries: int = Field(2, ge=0, description="model judges: retries of a failed attempt")
    judge_fail_after: int = Field(3, ge=1, description="model judges: stop the eval after this many failed attempts in a row")
    limit: _Limit | dict[str, _Limit] | None = Field(
        None, description="at most this many items per task (a seeded sample); or per eval name, e.g. {jailbreak: 32} "
        "(an eval not named has no limit)")
    seed: Annotated[int, AnyValue("a seed: every integer is one")] = Field(0, description="seed of the item sample and of sampled generation")
    templates: dict[str, str] = Field(
        default_factory=dict, description="template set per axis when not the data source's own, e.g. {sycophancy: real}"
    )
    generation: GenerationConfig = Field(default_factory=GenerationConfig, description="how the model answers (greedy by default)")
    reasoning: Literal["strip", "keep"] = Field(
        "strip", description="strip: remove <think> blocks before every parser and judge; keep: judge them too"
    )
    max_unscored: float = Field(
        0.05, ge=0.0, le=1.0, description="an eval with a larger share of unscored records is incomplete"
    )
    allow_unscored: bool = Field(False, description="exit 0 even when an eval is incomplete (it is still marked)")

    @field_validator("templates")
    @classmethod
    def _known_template_sets(cls, value: dict[str, str]) -> dict[str, str]:
        for axis, name in value.items():
            sets = data_view(AXES.get(axis)).templates if axis in AXES else {}
            if name not in sets:
                raise ValueError(f"axis {axis!r} has no template set {name!r}; it has {', '.join(sets) or 'none'}")
        return value

    @field_validator("limit")
    @classmethod
    def _positive_known_limits(cls, value: int | dict[str, int] | None) -> int | dict[str, int] | None:
        limits = value if isinstance(value, dict) else {} if value is None else {"": value}
        for name, n in limits.items():
            if n <= 0:
                raise ValueError(f"limit{f'.{name}' if name else ''} must be a positive number of items, got {n}")
        unknown = sorted(set(limits) - {"", *_all_axes()})
        if unknown:
            raise ValueError(f"limit names unknown eval(s) {', '.join(unknown)}; known: {', '.join(_all_axes())}")
        return value

    def limit_for(self, name: str) -> int | None:
        """The item limit of eval ``name``: the one limit, or its own in a per-eval mapping (else none)."""
        return self.limit.get(name) if isinstance(self.limit, dict) else self.limit

    @field_validator("real")
    @classmethod
    def _known_keys(cls, value: dict[str, str]) -> dict[str, str]:
        known = real_data_keys()
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"unknown real-data key(s) {unknown}; known: {', '.join(known)}")
        return value

    def judge_options(self) -> Any:
        """The model judges' :class:`opct.judges.JudgeOptions` (timeout, retries, fail-fast)."""
        return JudgeOptions(timeout=self.judge_timeout, max_retries=self.judge_retries, fail_after=self.judge_fail_after)

    def real_paths(self) -> dict[str, str]:
        """``real`` with the benchmarks found under ``data_dir`` added where no path was given."""
        paths: dict[str, str] = {}
        if self.data_dir:
            root = Path(self.data_dir)
            paths = {k: str(root / sub) for k, sub in data_dir_layout().items() if (root / sub).exists()}
        return {**paths, **{k: v for k, v in self.real.items() if v}}


def _all_axes() -> list[str]:
    return AXES.names()


class EvalConfig(EvalOptions):
    """``opct eval``: one model on some axes (and capability)."""

    model: ModelConfig = Field(
        default_factory=ModelConfig,
        description="the model spec (a plain name is name_or_path): organism, a hub id, a folder, a run directory or its final/",
    )
    evals: list[str] = Field(default_factory=_all_axes, min_length=1, description="registered axes to evaluate")
    out: str = Field("runs/eval", description="output folder (resumable)")
    threads: int | None = Field(
        None, gt=0, description="CPU threads for torch (--threads and OPCT_THREADS override it; None: torch's default)"
    )

    @field_validator("model", mode="before")
    @classmethod
    def _name_is_a_spec(cls, value: Any) -> Any:
        return {"name_or_path": value} if isinstance(value, str) else value

    @field_validator("evals")
    @classmethod
    def _known_evals(cls, value: list[str]) -> list[str]:
        names = _all_axes()
        unknown = [e for e in value if e not in names]
        if unknown:
            raise ValueError(f"unknown eval(s) {', '.join(unknown)}; choose from {', '.join(names)}")
        return value


def load_eval_config(path: str | Path | None = None, overrides: list[tuple[str, Any]] | None = None) -> EvalConfig:
    """Read an eval YAML, apply ``(dotted key, value)`` overrides in order, and validate."""
    tree, source = read_config_file(path, "eval config")
    if isinstance(tree.get("model"), str):
        tree["model"] = {"name_or_path": tree["model"]}
    for key, value in overrides or []:
        set_dotted(tree, key, value)
    return validate_config(EvalConfig, tree, source)


__all__ = ["EvalConfig", "EvalOptions", "data_dir_layout", "load_eval_config", "parse_overrides", "real_data_keys"]
