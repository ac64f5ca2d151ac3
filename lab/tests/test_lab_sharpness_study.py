"""The sharpness study (docs/sharpness.md): each variant changes only how sharp its method's target is, and
the pre-registered contrasts are the report's own pooled paired differences."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script("benchmarks/sharpness_contrasts.py")


def test_each_variant_changes_only_its_targets_sharpness() -> None:
    from opct.experiments.runner import load_experiment, resolve

    plan = resolve(load_experiment(str(files("opct_lab") / "studies" / "organism_sharpness.yaml")))
    assert sorted({r.key.rsplit("-s", 1)[1] for r in plan.runs}) == ["0", "1", "2"]
    runs = {r.key: r.config for r in plan.runs if r.key.endswith("-s1")}
    bct, opct, soft, sharp = (runs[f"{m}-s1"] for m in ("bct", "opct", "bct-sampled", "opct-sharp"))
    for axis in ("sycophancy", "jailbreak", "awareness"):
        t = soft.method_config.targets.for_axis(axis)
        assert (t.n, t.temperature) == (3, 1.0)
    assert bct.method_config.targets.for_axis("jailbreak").n == 1  # the parent stays greedy there
    assert sharp.method_config.teacher_temperature == 0.5 and opct.method_config.teacher_temperature == 1.0
    # nothing else of the parent's recipe changes
    assert sharp.method_config.model_dump(exclude={"teacher_temperature"}) == \
        opct.method_config.model_dump(exclude={"teacher_temperature"})
    assert soft.method_config.model_dump(exclude={"targets"}) == bct.method_config.model_dump(exclude={"targets"})
    for parent, child in ((bct, soft), (opct, sharp)):
        assert (child.optim, child.train.max_steps, child.data) == (parent.optim, parent.train.max_steps, parent.data)


def test_the_contrasts_are_the_reports_pooled_differences(tmp_path: Path) -> None:
    from opct.report.load import load_experiment
    from opct.report.pooled import difference_parts, pooled_rows
    from opct.testing.synthetic_experiment import make_experiment

    root = make_experiment(tmp_path / "exp", samples=True)
    script = _script()
    rows = script.contrast_rows(root)
    # the fabricated experiment trains bct and opct only: the one contrast it can give is the verdict's
    assert {(r["a"], r["b"]) for r in rows} == {("bct", "opct")}
    exp = load_experiment(root)
    expected = {r.column.header: difference_parts(r) for r in pooled_rows({exp.name: exp}, "bct", "opct")}
    assert {r["column"]: (r["value"], r["interval"]) for r in rows} == expected
    assert script.main([str(root), "--json", str(tmp_path / "c.json")]) == 0
    assert json.loads((tmp_path / "c.json").read_text()) == json.loads(json.dumps(rows))


def test_no_contrast_is_an_error(tmp_path: Path, capsys) -> None:
    from opct.testing.synthetic_experiment import make_experiment

    root = make_experiment(tmp_path / "exp", samples=True)
    plan = json.loads((root / "plan.json").read_text())
    plan["methods"] = ["base", "opct"]
    (root / "plan.json").write_text(json.dumps(plan))
    assert _script().main([str(root)]) == 1
    assert "no contrast has both of its methods trained" in capsys.readouterr().err


def test_the_trained_methods_are_read_from_seeded_run_keys(tmp_path: Path) -> None:
    """A study with several seeds lists its runs as ``bct-s0``, ``bct-s1``: the methods are what is before ``-s``."""
    from opct.testing.synthetic_experiment import make_experiment

    root = make_experiment(tmp_path / "exp", samples=True)
    plan = json.loads((root / "plan.json").read_text())
    plan["seeds"], plan["methods"] = [0, 1], ["base", "bct-s0", "opct-s0"]
    (root / "plan.json").write_text(json.dumps(plan))
    for method in ("bct", "opct"):
        for sub in ("eval", "attack", "train"):
            if (root / sub / method).exists():
                (root / sub / method).rename(root / sub / f"{method}-s0")
    rows = _script().contrast_rows(root)
    assert {(r["a"], r["b"]) for r in rows} == {("bct", "opct")}
