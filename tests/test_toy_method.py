"""A training method added from outside opct: registered with its card, it is validated by the config and
shown, coloured, ordered and pooled by the report and the study without any shared code naming it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest
from pydantic import Field

from opct.config import RunConfig, StrictSettings
from opct.methods import METHODS, MethodCard
from opct.report.experiment import Experiment
from opct.report.figure_style import BASE_COLOUR, OTHER_COLOURS, method_colours
from opct.report.pooled import PAPER_PAIR
from opct.report.table import method_label


class ToyConfig(StrictSettings):
    """The toy method's own section."""

    strength: float = Field(1.0, gt=0.0, description="how hard the toy pulls")


class ToyMethod:
    """A method as a plugin writes one: its name, settings and card (no training needed here)."""

    name: ClassVar[str] = "toy"
    config_class: ClassVar[type[ToyConfig]] = ToyConfig
    card: ClassVar[MethodCard] = MethodCard(label="Toy")


class PaintedToyMethod(ToyMethod):
    """A toy method with its own colour and a place in the tables."""

    name: ClassVar[str] = "painted"
    card: ClassVar[MethodCard] = MethodCard(label="Painted", colour="#123456", order=0)


@pytest.fixture
def toy_methods() -> Iterator[None]:
    METHODS.register("toy", ToyMethod)
    METHODS.register("painted", PaintedToyMethod)
    try:
        yield
    finally:
        METHODS.unregister("toy")
        METHODS.unregister("painted")


def test_the_built_in_cards_keep_the_papers_pair_the_default_and_the_colours():
    assert PAPER_PAIR == METHODS.paper_pair() == ("opct", "bct")
    assert METHODS.default == "opct" and RunConfig().method == "opct"
    assert method_colours(["base", "bct", "opct", "act", "opct-s1"]) == {
        "base": BASE_COLOUR, "bct": "#E69F00", "opct": "#0072B2", "act": "#009E73", "opct-s1": "#CC79A7"}
    assert method_colours(["base", "opct", "lr3e-5"])["lr3e-5"] == OTHER_COLOURS[0]  # ACT absent: its green is free
    assert [method_label(m) for m in ("base", "bct", "opct", "act", "grpo_attack", "opct-s0")] == [
        "base", "BCT", "OPCT", "ACT", "GRPO_ATTACK", "opct-s0"]


def test_a_toy_method_is_validated_labelled_coloured_and_ordered(toy_methods, tmp_path):
    cfg = RunConfig.model_validate({"method": "toy", "toy": {"strength": 2.0}})
    assert cfg.method_config.strength == 2.0
    with pytest.raises(ValueError, match="toy.strength"):
        RunConfig.model_validate({"method": "toy", "toy": {"strength": 0}})
    assert (method_label("toy"), method_label("painted")) == ("Toy", "Painted")
    colours = method_colours(["base", "bct", "opct", "act", "toy", "painted"])
    assert colours["toy"] == "#CC79A7" and colours["painted"] == "#123456"  # the first colour no card took
    assert len(set(colours.values())) == len(colours)
    exp = Experiment(root=tmp_path, plan={}, train={m: [] for m in ("zeta", "toy", "opct", "base", "painted", "bct")})
    assert exp.methods == ["base", "painted", "bct", "opct", "toy", "zeta"]  # base, cards by order, the rest by name


@pytest.mark.parametrize("method, generated, scored", [("bct", 5, 0), ("act", 0, 7), ("opct", 7, 7), ("toy", 7, 7)])
def test_a_manifest_without_compute_is_read_as_its_method_declares(method, generated, scored, toy_methods, tmp_path):
    """Manifests written before they recorded ``compute``: the registered method's own declaration, never a
    table of method names in the runs package; a method that declares none (the toy) counts as on-policy."""
    import json

    from opct.methods import declared_compute
    from opct.runs.compute import run_compute
    from opct.runs.layout import RunLayout

    layout = RunLayout(tmp_path)
    layout.metrics.write_text("\n".join(json.dumps({"step": s, "completion_tokens": n, "step_time_s": 0.5})
                                        for s, n in ((1, 3), (2, 4))) + "\n")
    layout.manifest.write_text(json.dumps({"method": method}))
    layout.cache(method).mkdir()
    (layout.cache(method) / "targets.jsonl").write_text(json.dumps({"targets": [[1, 2], [3, 4, 5]]}) + "\n")
    if method == "toy":
        assert declared_compute("toy") is None  # ToyMethod declares no compute
    spent = run_compute(tmp_path, declared=declared_compute)
    assert (spent["tokens_generated"], spent["tokens_teacher_scored"], spent["tokens_backpropagated"]) == (generated, scored, 7)
