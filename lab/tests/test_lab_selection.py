"""Recipe selection: equal budgets, fixed rules applied to validation records only, both picks reported."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from opct.config import ConfigError
from opct.report.selection import chosen_lines
from opct_lab.selection.run import (
    RULES,
    candidate_configs,
    expand,
    load_selection,
    pick,
    recipe_tree,
    score_candidates,
)

DEMO = Path(__file__).resolve().parents[2] / "opct" / "experiments" / "organism_demo.yaml"


def _selection_file(tmp_path: Path, grid: dict, **selection) -> Path:
    tree = {"extends": str(DEMO), "name": "sel", "output_dir": str(tmp_path / "out"),
            "selection": {"steps": 4, "every": 2, "seeds": [0, 1], "grid": grid, **selection}}
    path = tmp_path / "selection.yaml"
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    return path


def test_the_grid_expands_in_order_and_every_method_gets_the_same_budget(tmp_path):
    assert expand({"a": [1, 2], "b": ["x", "y"]}) == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"},
                                                      {"a": 2, "b": "y"}]
    with pytest.raises(ConfigError, match="same number of candidates"):
        load_selection(_selection_file(tmp_path, {"bct": {"optim.lr": [1e-3]}, "opct": {"optim.lr": [1e-3, 3e-3]}}))
    with pytest.raises(ConfigError, match="must share"):
        load_selection(_selection_file(tmp_path, {"bct": {"train.pairs_per_step": [4]}, "opct": {"optim.lr": [1e-3]}}))


def test_candidates_share_everything_but_their_recipe_and_measure_the_validation_split(tmp_path):
    cfg = load_selection(_selection_file(tmp_path, {"bct": {"optim.lr": [1e-4, 1e-3]},
                                                    "opct": {"optim.lr": [1e-3], "opct.loss": [{"kind": "sampled"}, {"kind": "topk"}]}}))
    runs = candidate_configs(cfg)
    assert len(runs) == 8 and [r[3].seed for r in runs[:4]] == [0, 0, 0, 0]  # every first seed before any second
    for _, method, _recipe, run in runs:
        assert run.train.max_steps == 4 and run.train.checkpoint_every == 2 and run.validation.every == 2
        assert run.train.pairs_per_step == 16 and run.method == method
        assert run.data.validation == [f"organism:{a}:{s}" for a in ("sycophancy", "jailbreak", "awareness")
                                       for s in ("val", "famval")]
        assert all(s.endswith(":train") for s in run.data.train)
    kinds = [run.method_config.loss.kind for _, m, _, run in runs if m == "opct"]
    assert kinds == ["sampled", "topk", "sampled", "topk"]
    assert [run.optim.lr for _, m, _, run in runs if m == "bct"] == [1e-4, 1e-3, 1e-4, 1e-3]


def _candidate(cid: str, method: str, rows: dict[int, tuple[float, float, bool]]) -> dict:
    return {"id": cid, "method": method, "recipe": {"optim.lr": 1e-3},
            "steps": {step: {"val_teacher_kl": kl, "val_good": good, "eligible": ok,
                             "val_teacher_kl_by_seed": [kl, kl], "val_good_by_seed": [good, good], "val_cap": {},
                             "compute": {}} for step, (kl, good, ok) in rows.items()}}


def test_the_rules_pick_among_eligible_steps_only_and_can_disagree():
    candidates = [
        _candidate("opct-00", "opct", {20: (0.10, 0.50, True), 40: (0.05, 0.60, False)}),  # best KL fails the guard
        _candidate("opct-01", "opct", {20: (0.20, 0.90, True), 40: (0.08, 0.70, True)}),
    ]
    assert pick(candidates, "opct", "teacher_kl")["candidate"] == "opct-01" and pick(candidates, "opct", "teacher_kl")["step"] == 40
    good = pick(candidates, "opct", "good_behaviour")
    assert (good["candidate"], good["step"]) == ("opct-01", 20)
    tie = [_candidate("a", "bct", {20: (0.3, 0.8, True), 40: (0.2, 0.8, True)})]
    assert pick(tie, "bct", "good_behaviour")["step"] == 40  # a tie goes to the lower teacher-KL
    assert pick([_candidate("b", "bct", {20: (0.1, 0.9, False)})], "bct", "teacher_kl") is None
    nan = [_candidate("c", "bct", {20: (0.1, math.nan, True)}), _candidate("d", "bct", {20: (0.2, 0.1, True)})]
    assert pick(nan, "bct", "good_behaviour")["candidate"] == "d"  # an unmeasured rate never wins
    assert recipe_tree({"recipe": {"optim.lr": 3e-4, "opct.loss": {"kind": "topk"}}, "step": 60}) == {
        "optim": {"lr": 3e-4}, "opct": {"loss": {"kind": "topk"}}, "train": {"max_steps": 60}}


def test_scoring_reads_the_runs_validation_records_and_applies_the_capability_guard(tmp_path):
    cfg = load_selection(_selection_file(tmp_path, {"bct": {"optim.lr": [1e-4]}, "opct": {"optim.lr": [1e-3]}},
                                         capability_drop=0.03))
    for _cid, method, _, run in candidate_configs(cfg):
        run.run_dir.mkdir(parents=True)
        (run.run_dir / "manifest.json").write_text(json.dumps({"method": method}))
        (run.run_dir / "metrics.jsonl").write_text("".join(
            json.dumps({"step": s, "completion_tokens": 100, "step_time_s": 1.0}) + "\n" for s in (1, 2, 3, 4)))
        if method == "bct":
            (run.run_dir / "bct_targets").mkdir()
            (run.run_dir / "bct_targets" / "x.jsonl").write_text(json.dumps({"id": "p", "targets": [[1, 2, 3]]}) + "\n")
        # opct: lower KL at step 4 but capability down 5 points there on seed 1 only
        drop = 0.05 if (method == "opct" and run.seed == 1) else 0.0
        rows = [{"step": 0, "val_teacher_kl": 0.5, "val_good": 0.2, "val_cap/capability_mc": 1.0},
                {"step": 2, "val_teacher_kl": 0.3 if method == "opct" else 0.4, "val_good": 0.5, "val_cap/capability_mc": 1.0},
                {"step": 4, "val_teacher_kl": 0.1, "val_good": 0.6, "val_cap/capability_mc": 1.0 - drop}]
        (run.run_dir / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = score_candidates(cfg)
    assert result["rules"] == RULES and result["budget"] == {"bct": 1, "opct": 1}
    assert result["chosen"]["opct"]["teacher_kl"]["step"] == 2  # step 4 fails the guard on one seed
    assert result["chosen"]["bct"]["teacher_kl"]["step"] == 4
    opct = next(c for c in result["candidates"] if c["method"] == "opct")
    assert opct["steps"][4]["eligible"] is False and opct["steps"][2]["compute"]["tokens_backpropagated"] == 200
    bct = next(c for c in result["candidates"] if c["method"] == "bct")
    assert bct["steps"][2]["compute"]["tokens_generated"] == 3 and bct["steps"][2]["compute"]["tokens_teacher_scored"] == 0
    assert result["method_settings"]["teacher_kl"]["opct"] == {"optim": {"lr": 1e-3}, "train": {"max_steps": 2}}


def test_a_pick_whose_rollouts_degenerated_by_its_step_is_warned_about_seed_by_seed(tmp_path):
    cfg = load_selection(_selection_file(tmp_path, {"opct": {"optim.lr": [1e-3]}}, steps=8, every=4))
    for _cid, method, _, run in candidate_configs(cfg):
        run.run_dir.mkdir(parents=True)
        (run.run_dir / "manifest.json").write_text(json.dumps({"method": method}))
        collapses = run.seed == 1  # seed 1's sampler blows up after step 4: entropy 0.3 -> 5, most rollouts cut
        (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps({
            "step": s, "completion_tokens": 100, "step_time_s": 1.0, "kl_to_teacher": 4.0 if collapses and s > 4 else 0.01,
            "entropy": 5.0 if collapses and s > 4 else 0.3, "truncation_rate": 0.8 if collapses and s > 4 else 0.0})
            + "\n" for s in range(1, 9)))
        rows = [{"step": s, "val_teacher_kl": 0.5 - 0.05 * s, "val_good": 0.5, "val_cap/capability_mc": 1.0} for s in (0, 4, 8)]
        (run.run_dir / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = score_candidates(cfg, attack=False)
    pick = result["chosen"]["opct"]["teacher_kl"]
    assert pick["step"] == 8 and [d["seed"] for d in pick["rollouts_degenerated"]] == [1]
    lines = chosen_lines(result)
    warnings = [line for line in lines if line.startswith("WARNING: opct, teacher_kl rule, seed 1: its own samples degenerated")]
    assert len(warnings) == 1 and "0.30 → 5.00 nats per token" in warnings[0]
    # at step 4, before the collapse, the same candidate would carry no warning
    from opct_lab.selection.run import degenerated_seeds

    assert degenerated_seeds(cfg, {**pick, "step": 4}) == []


def test_the_demo_measures_every_run_on_the_validation_split_and_ships_its_picks():
    from opct.experiments.runner import load_experiment, resolve

    cfg = load_experiment(DEMO)
    for stage in resolve(cfg).runs:
        run = stage.config
        assert run.validation.every == 20 and run.validation.judge == "organism"
        assert run.data.validation == [f"organism:{a}:{s}" for a in cfg.axes for s in ("val", "famval")]
        assert all(s.endswith(":train") for s in run.data.train)
    from opct.experiments.recipes import selection_rule

    evidence = json.loads(Path(cfg.selection).read_text())  # the shipped picks are the evidence file's own
    assert selection_rule(evidence, cfg.method_settings) == "teacher_kl"
    assert selection_rule(evidence, {"bct": {"optim": {"lr": 1.0}}}) is None


def test_the_report_names_each_recipe_and_what_chose_it():
    from opct.report.selection import profile_tables, recipe_rows

    plan = {"recipes": {"bct": {"lr": 3e-4, "steps": 120, "pairs_per_step": 16},
                        "opct": {"lr": 1e-3, "steps": 60, "pairs_per_step": 16, "n": 3, "temperature": 1.0,
                                 "loss": "topk"}}}
    selection = {"chosen": {"bct": {}, "opct": {}}, "method_settings": {"teacher_kl": {"bct": {}, "opct": {}}}}
    rows = recipe_rows({**plan, "selection_rule": "good_behaviour"}, selection)
    assert rows[0] == ["bct", "0.0003", "120", "16", "—", "—", "opct-lab select (good_behaviour rule)"]
    assert rows[1][4:6] == ["topk", "3, 1"]
    assert recipe_rows({**plan, "selection_rule": None}, selection)[0][-1] == "the experiment file"
    assert recipe_rows(plan, {})[0][-1] == "the experiment file"
    from opct.diagnostics.offpolicy import PairProfile, summarize

    pair = PairProfile("p", "jailbreak", "c", [1, 2], False, [3, 2], False, [-2.0, -0.1], [0.4, 0.0], 4, 0.7, [[-0.2]], [False])
    profile = summarize([pair], {"pairs_per_axis": 100, "max_new_tokens": 48})
    tables = profile_tables({"bct-s0": {**profile, "seconds": 1.0}, "opct-s0": {**profile, "seconds": 2.0},
                             "act-s0": {"skipped": "profile.pairs_per_axis is 0"}})
    (caption, header, table), skipped = tables  # the runs that measured the same start share one table
    assert "bct-s0, opct-s0" in caption and header == ["measure", "jailbreak"] and "act-s0" in skipped[0]
    assert dict((r[0], r[1]) for r in table)["target's rank there (median)"].startswith("4 ")


def test_a_number_not_measured_is_written_as_null_and_every_shipped_selection_is_strict_json():
    from opct.runs.atomic import finite_or_null

    assert finite_or_null({"a": math.nan, "b": [1.5, math.inf, {"c": -math.inf}], "d": "NaN"}) == \
        {"a": None, "b": [1.5, None, {"c": None}], "d": "NaN"}

    def refuse(constant: str) -> None:
        raise ValueError(f"non-strict JSON constant {constant}")

    for path in DEMO.parent.glob("organism_selection*.json"):
        evidence = json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)
        assert evidence["chosen"] and evidence["method_settings"], path


@pytest.mark.parametrize("jobs", [1, 2])
def test_candidates_train_as_stages_each_an_opct_train_of_its_written_config(tmp_path, monkeypatch, jobs):
    from opct_lab.selection import run as selection

    cfg = load_selection(_selection_file(tmp_path, {"bct": {"optim.lr": [1e-4]}, "opct": {"optim.lr": [1e-3]}}))
    seen = {}

    def fake_stages(stages, n, command, log_path, log=print, env=None, finished=None, **_):
        seen.update(stages=stages, jobs=n, commands=[command(s) for s in stages], logs=[log_path(s) for s in stages], env=env,
                    finished=[finished(s) for s in stages])

    monkeypatch.setattr(selection, "run_stages", fake_stages)
    selection.run_candidates(cfg, jobs=jobs, log=lambda line: None)
    names = [run.name for *_, run in candidate_configs(cfg)]
    assert [s.name for s in seen["stages"]] == [f"train:{n}" for n in names] and seen["jobs"] == jobs
    for name, cmd, log in zip(names, seen["commands"], seen["logs"], strict=True):
        written = yaml.safe_load(Path(cmd[cmd.index("-c") + 1]).read_text())
        assert cmd[1:4] == ["-m", "opct.cli", "train"] and written["name"] == name
        assert ("--threads" in cmd) == (jobs > 1) and log.parent.name == "stages" and name in log.name
    assert (seen["env"] or {}).get("OPCT_THREADS") == ("1" if jobs > 1 else None)
    assert seen["finished"] == [False] * len(names)  # nothing trained yet: every candidate gets its process
    asked = []
    monkeypatch.setattr(selection, "already_trained", lambda run: asked.append(run.name) or run.name == names[0])
    selection.run_candidates(cfg, jobs=jobs, log=lambda line: None)
    assert asked == names and seen["finished"] == [True] + [False] * (len(names) - 1)  # a rerun keeps what is done


def _collapsing_opct_runs(cfg, kl_at: dict[int, float]) -> None:
    """Two opct runs per candidate with validation teacher-KL ``kl_at[step]`` (base at step 0); seed 1's rollouts
    degenerate after step 4 (entropy 0.3 -> 5, most rollouts cut at the limit)."""
    for _cid, method, _, run in candidate_configs(cfg):
        run.run_dir.mkdir(parents=True)
        (run.run_dir / "manifest.json").write_text(json.dumps({"method": method}))
        collapses = run.seed == 1
        bad = lambda s, collapses=collapses: collapses and s > 4  # noqa: E731
        (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps({
            "step": s, "completion_tokens": 100, "step_time_s": 1.0, "kl_to_teacher": 4.0 if bad(s) else 0.01,
            "entropy": 5.0 if bad(s) else 0.3, "truncation_rate": 0.8 if bad(s) else 0.0}) + "\n" for s in range(1, 13)))
        rows = [{"step": s, "val_teacher_kl": kl, "val_good": 0.5, "val_cap/capability_mc": 1.0} for s, kl in kl_at.items()]
        (run.run_dir / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_amendment_a_is_off_by_default_and_when_on_refuses_degenerated_and_far_from_teacher_steps(tmp_path):
    kl_at = {0: 0.2, 4: 0.3, 8: 0.1, 12: 0.05}  # step 4 is further from the teacher than the base (0.2)
    for sub in ("off", "on", "again"):
        (tmp_path / sub).mkdir()
    off = load_selection(_selection_file(tmp_path / "off", {"opct": {"optim.lr": [1e-3]}}, steps=12, every=4))
    assert off.selection.eligibility == "protocol"
    _collapsing_opct_runs(off, kl_at)
    before = score_candidates(off, attack=False)
    assert before["eligibility"] == "protocol" and before["rules"] == RULES
    assert before["chosen"]["opct"]["teacher_kl"]["step"] == 12 and before["chosen"]["opct"]["teacher_kl"]["rule_version"] == "protocol"
    assert all(m["eligible"] and "eligibility" not in m for m in before["candidates"][0]["steps"].values())

    on = load_selection(_selection_file(tmp_path / "on", {"opct": {"optim.lr": [1e-3]}}, steps=12, every=4,
                                        eligibility="amendment-a"))
    _collapsing_opct_runs(on, kl_at)
    logged: list[str] = []
    after = score_candidates(on, attack=False, log=logged.append)
    steps = after["candidates"][0]["steps"]
    assert [s for s, m in steps.items() if m["eligible"]] == []  # 4: KL above base; 8, 12: seed 1 degenerated
    assert steps[4]["eligibility"] == {"capability_guard": True, "amendment_a": False, "why_not": [
        "its validation teacher-KL 0.300 exceeds the base model's 0.200"]}
    assert steps[8]["eligibility"]["why_not"][0].startswith("seed 1: its rollouts degenerated by this step")
    assert after["chosen"]["opct"]["teacher_kl"] is None and logged == [
        "amendment (a): 3 (candidate, step) points the capability guard kept are not eligible"]
    assert after["eligibility"] == "amendment-a" and "amendment (a)" in after["rules"]["eligible"]
    assert "opct, teacher_kl rule: no eligible recipe (every candidate failed the capability guard or amendment (a))" \
        in chosen_lines(after)

    kept = {0: 0.2, 4: 0.15, 8: 0.1, 12: 0.05}  # every step closer than the base: only the collapse refuses
    again = load_selection(_selection_file(tmp_path / "again", {"opct": {"optim.lr": [1e-3]}}, steps=12, every=4,
                                           eligibility="amendment-a"))
    _collapsing_opct_runs(again, kept)
    choice = score_candidates(again, attack=False, log=lambda _: None)["chosen"]["opct"]["teacher_kl"]
    assert (choice["step"], choice["rule_version"]) == (4, "amendment-a")
    assert chosen_lines({"chosen": {"opct": {"teacher_kl": choice}}})[0].startswith(
        "opct, teacher_kl rule [eligibility: amendment (a)]: opct-00 at step 4")


def test_an_unknown_eligibility_version_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="eligibility"):
        load_selection(_selection_file(tmp_path, {"opct": {"optim.lr": [1e-3]}}, eligibility="amendment-z"))
