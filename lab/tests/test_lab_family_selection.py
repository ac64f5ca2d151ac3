"""Selection per model family: a study trains each family's own picks, each with its own selection.json,
and ``opct-lab demo-full --reselect`` selects once per family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from opct.config import ConfigError
from opct_lab.selection.per_family import select_per_family
from opct_lab.study.config import family_experiment, load_study

EXPERIMENTS = Path(__file__).resolve().parents[1] / "opct_lab" / "studies"
DEMO = Path(__file__).resolve().parents[2] / "opct" / "experiments" / "organism_demo.yaml"


def _evidence(path: Path, lr: float, steps: int, rules=("teacher_kl", "family_transfer")) -> Path:
    picks = {"bct": {"optim": {"lr": lr}, "train": {"max_steps": steps}}}
    path.write_text(json.dumps({"method_settings": {rule: picks for rule in rules}}), encoding="utf-8")
    return path


def _study(tmp_path: Path, **extra) -> Path:
    tree = {"extends": str(DEMO), "name": "st", "output_dir": str(tmp_path / "out"),
            "methods": ["base", "bct"], "families": {"llama": "organism-llama", "gpt2": "organism-gpt2"}, **extra}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    return path


def test_each_family_trains_its_own_picks_with_its_own_evidence(tmp_path):
    (tmp_path / "sel").mkdir()
    _evidence(tmp_path / "sel" / "llama.json", 1e-4, 40)
    _evidence(tmp_path / "sel" / "gpt2.json", 3e-3, 80, rules=("teacher_kl",))
    study = load_study(_study(tmp_path, family_picks={"llama": {"selection": "sel/llama.json"},
                                                     "gpt2": {"selection": "sel/gpt2.json"}}))
    llama, gpt2 = family_experiment(study, "llama"), family_experiment(study, "gpt2")
    assert llama.selection == str((tmp_path / "sel" / "llama.json").resolve())  # relative to the study file
    assert llama.method_settings["bct"] == {"optim": {"lr": 1e-4}, "train": {"max_steps": 40}}
    assert gpt2.method_settings["bct"] == {"optim": {"lr": 3e-3}, "train": {"max_steps": 80}}
    assert gpt2.method_settings["opct"] == study.method_settings["opct"]  # a method the file does not pick keeps the shared recipe
    shared = load_study(_study(tmp_path))
    assert family_experiment(shared, "gpt2").method_settings == shared.method_settings
    # pick_rule switches every listed family's rule; a rule a family's file lacks is an error naming the file
    ruled = load_study(_study(tmp_path, family_picks={"llama": {"selection": "sel/llama.json"}}, pick_rule="family_transfer"))
    assert family_experiment(ruled, "llama").method_settings["bct"]["optim"]["lr"] == 1e-4
    lacking = load_study(_study(tmp_path, family_picks={"gpt2": {"selection": "sel/gpt2.json", "rule": "family_transfer"}}))
    with pytest.raises(ConfigError, match=r"gpt2\.json holds no 'family_transfer' picks"):
        family_experiment(lacking, "gpt2")
    with pytest.raises(ConfigError, match="family_picks names qwen3"):
        load_study(_study(tmp_path, family_picks={"qwen3": {"selection": "sel/llama.json"}}))


def test_the_plan_and_the_run_keep_each_familys_evidence(tmp_path):
    from opct.experiments.runner import resolve
    from opct_lab.study.runner import resolve_study

    _evidence(tmp_path / "llama.json", 1e-4, 40)
    study = load_study(_study(tmp_path, family_picks={"llama": {"selection": "llama.json"}}))
    plan = resolve_study(study)
    assert "recipes: its own selection" in plan.describe() and "recipes: the shared method_settings" in plan.describe()
    bct = next(r for r in resolve(family_experiment(study, "llama")).runs if r.config.method == "bct")
    assert bct.config.optim.lr == 1e-4 and bct.config.train.max_steps == 40


def test_select_per_family_runs_the_selection_on_each_familys_model_in_its_own_folder(tmp_path, monkeypatch):
    from opct_lab.selection import per_family
    from opct_lab.selection import run as selection

    seen = []

    def fake_run(cfg, jobs=1, log=print):
        seen.append((cfg.model.name_or_path, cfg.root, [r.model.name_or_path for *_, r in selection.candidate_configs(cfg)]))
        cfg.root.mkdir(parents=True)
        return cfg.root / "selection.json"

    monkeypatch.setattr(per_family, "run_selection", fake_run)
    sel = tmp_path / "sel.yaml"
    sel.write_text(yaml.safe_dump({"extends": str(DEMO), "name": "sel",
                                   "output_dir": str(tmp_path / "selout"),
                                   "selection": {"steps": 2, "every": 1, "seeds": [0],
                                                 "grid": {"bct": {"optim.lr": [1e-3]}, "opct": {"optim.lr": [1e-3]}}}}))
    paths = select_per_family(load_study(_study(tmp_path)), sel, log=lambda line: None)
    assert list(paths) == ["llama", "gpt2"]
    assert [s[0] for s in seen] == ["organism-llama", "organism-gpt2"]
    assert len({s[1] for s in seen}) == 2 and all(str(tmp_path / "selout") in str(s[1]) for s in seen)
    assert all(set(models) == {s[0]} for s in seen for models in [s[2]])  # every candidate trains that family's model


def test_demo_full_reselect_trains_each_familys_picks(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from opct_lab import cli
    from opct_lab.cli import app

    def fake_select(st, selection_file, jobs=1, log=print, overrides=None):
        return {f: _evidence(tmp_path / f"{f}.json", lr, 20) for f, lr in zip(st.families, (1e-4, 2e-4, 5e-4), strict=False)}

    monkeypatch.setattr(cli, "select_per_family", fake_select)
    result = CliRunner().invoke(app, ["demo-full", "--reselect", "--dry-run", "--rule", "family_transfer"])
    assert result.exit_code == 0, result.output
    flat = "".join(result.output.split()).replace(str(tmp_path) + "/", "")  # rich may wrap inside a long path
    for family in ("llama", "qwen3", "gpt2"):
        assert f"{family}.json(family_transferrule)" in flat
    shipped = CliRunner().invoke(app, ["demo", "--dry-run", "--rule", "family_transfer"])  # llama's own evidence has it
    assert shipped.exit_code == 0 and "organism-demo-family-transfer" in shipped.output, shipped.output


def test_a_rule_an_older_selection_lacks_is_an_error_naming_the_file(tmp_path):
    from opct_lab.study.config import family_recipes

    folder = Path(__file__).resolve().parents[1] / "opct_lab" / "studies"
    older = folder / "organism_selection_all_families.json"
    cfg = load_study(folder / "organism_demo_full.yaml",
                     [f"family_picks={json.dumps({'qwen3': {'selection': str(older), 'rule': 'family_transfer'}})}"])
    with pytest.raises(ConfigError, match="holds no 'family_transfer' picks"):
        family_recipes(cfg, "qwen3")


def _pick(cid: str, lr: float, step: int) -> dict:
    return {"candidate": cid, "step": step, "recipe": {"optim.lr": lr}}


def test_compare_rules_trains_every_distinct_pick_beside_the_shipped_one(tmp_path):
    from opct.experiments.runner import load_experiment, resolve

    evidence = {"method_settings": {"teacher_kl": {"bct": {"optim": {"lr": 3e-4}, "train": {"max_steps": 180}}}},
                "chosen": {"bct": {"teacher_kl": _pick("bct-02", 3e-4, 180), "good_behaviour": _pick("bct-02", 3e-4, 180),
                                   "family_transfer": _pick("bct-05", 2e-3, 40)},
                           "opct": {"teacher_kl": _pick("opct-03", 3e-4, 120), "good_behaviour": _pick("opct-01", 1e-4, 60),
                                    "family_transfer": _pick("opct-01", 1e-4, 60)}}}
    sel = tmp_path / "selection.json"
    sel.write_text(json.dumps(evidence))
    cfg = load_experiment(DEMO, [f"selection={sel}", "compare_rules=true",
                                                               "method_settings={bct: {optim: {lr: 3.0e-4}, train: {max_steps: 180}}}"])
    assert cfg.methods == ["base", "bct", "opct", "bct-family_transfer", "opct-good_behaviour"]
    runs = {r.key: r.config for r in resolve(cfg).runs}
    assert (runs["bct-family_transfer"].optim.lr, runs["bct-family_transfer"].train.max_steps) == (2e-3, 40)
    assert (runs["opct-good_behaviour"].optim.lr, runs["opct-good_behaviour"].train.max_steps) == (1e-4, 60)
    assert runs["opct-good_behaviour"].method == "opct"
    plain = load_experiment(DEMO, [f"selection={sel}"])
    assert plain.methods == ["base", "bct", "opct"] and not plain.variants


def test_the_plan_records_what_training_held_back_and_the_report_says_so():
    from opct.experiments.runner import held_back_by_axis, load_experiment
    from opct.report.selection import held_back_line

    held = held_back_by_axis(load_experiment(DEMO))
    assert held == {"sycophancy": ["majority", "hint"], "jailbreak": ["grandma", "dialogue"],
                    "awareness": ["sap_burn", "senior_dizzy"]}
    line = held_back_line({"held_back_families": held})
    assert line.startswith("Training used the remaining training families") and "jailbreak grandma, dialogue" in line
    assert held_back_line({}) is None  # an experiment dated before the split, or trained on other data, says nothing
    own = load_experiment(DEMO, ["train_data={sycophancy: [pairs.jsonl]}"])
    assert "sycophancy" not in held_back_by_axis(own)


def test_every_shipped_family_pick_is_that_familys_own_selection():
    from opct.config import MODEL_ALIASES
    from opct_lab.study.config import load_study

    study = load_study(EXPERIMENTS / "organism_demo_full.yaml")
    assert "qwen3" in study.family_picks  # selected on its own model, not llama's
    for family, pick in study.family_picks.items():
        evidence = json.loads((EXPERIMENTS / pick.selection).read_text(encoding="utf-8"))
        assert MODEL_ALIASES.get(evidence["model"]) == MODEL_ALIASES.get(study.families[family]), family
        assert set(evidence["chosen"]) >= {"bct", "opct"} and "family_transfer" in evidence["chosen"]["opct"], family
        experiment = family_experiment(study, family)
        chosen = evidence["chosen"]["bct"][pick.rule]
        assert experiment.method_settings["bct"]["train"]["max_steps"] == chosen["step"], family
