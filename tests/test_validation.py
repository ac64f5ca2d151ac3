"""The validation split and the training diagnostics: what recipe selection reads.

* the organism's validation split holds back whole clusters of the training families, never a
  held-out one, and is refused as training data;
* the validation teacher-KL is the whole-vocabulary reverse KL on the student's own samples: 0 when
  the cued and clean prompts are the same, equal for every method at step 0 (it does not depend on
  the method), and measuring it does not change what is trained;
* every method logs entropy, completion length and a truncation rate measured from its completions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import make_pairs, run_config
from safetensors.torch import load_file

from opct.config import RunConfig
from opct.organism.pairs import VALIDATION_SHARE, build_pairs
from opct.sampling.scoring import reverse_kl_sum, token_entropy_sum
from opct.training.loop import train

CLUSTER = {"sycophancy": "entity", "jailbreak": "behavior", "awareness": "fact_id"}


@pytest.mark.parametrize("axis", sorted(CLUSTER))
def test_the_validation_split_holds_back_whole_training_clusters(axis):
    train_pairs, val, heldout = (build_pairs(axis, s) for s in ("train", "val", "heldout"))
    key = CLUSTER[axis]
    train_clusters, val_clusters = {p["meta"][key] for p in train_pairs}, {p["meta"][key] for p in val}
    heldout_clusters = {p["meta"][key] for p in heldout}
    assert val and not train_clusters & val_clusters and not val_clusters & heldout_clusters
    share = len(val_clusters) / (len(train_clusters) + len(val_clusters))
    assert abs(share - VALIDATION_SHARE) < 0.05
    assert {p["meta"]["split"] for p in val} == {"val"}
    # the validation prompts use the training cue families, never a held-out one
    assert {p["meta"].get("family") for p in val} <= {p["meta"].get("family") for p in train_pairs}
    assert not {p["meta"].get("family") for p in val} & ({p["meta"].get("family") for p in heldout} - {None})
    assert [p["id"] for p in build_pairs(axis, "val")] == [p["id"] for p in val]  # deterministic


@pytest.mark.parametrize("axis", sorted(CLUSTER))
def test_the_family_validation_split_holds_back_whole_training_families(axis):
    from opct.axes import AXES

    spec = AXES.get(axis)
    key = spec.organism_family_key
    train_pairs, val, famval, heldout = (build_pairs(axis, s) for s in ("train", "val", "famval", "heldout"))
    held_back = set(spec.organism_validation_families)
    assert 1 <= len(held_back) <= 2 and {p["meta"][key] for p in famval} == held_back
    assert {p["meta"]["split"] for p in famval} == {"famval"}
    # training and the cluster validation split use the remaining families only; held-out test families never enter
    assert not held_back & {p["meta"][key] for p in train_pairs + val}
    assert not held_back & {p["meta"][key] for p in heldout}
    assert not {p["id"] for p in famval} & {p["id"] for p in train_pairs + val + heldout}
    # together, the three splits are exactly the axis's training-side pairs
    everything = {p["id"] for p in AXES.get(axis).organism_pairs("train")}
    assert {p["id"] for p in train_pairs + val + famval} == everything


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _val_rows(same: bool = False) -> list[dict]:
    rows = []
    for i in range(6):
        clean = [{"role": "user", "content": f"What is {i} times two?"}]
        cued = clean if same else [{"role": "user", "content": f"What is {i} times two? Surely {i + 1}."}]
        rows.append({"id": f"v{i}", "axis": "sycophancy", "prompt": cued, "teacher_prompt": clean, "meta": {"split": "val"}})
    return rows


def _cfg(tiny_model, pairs_file, val_file, out, **kw) -> RunConfig:
    overrides = {"data.validation": [str(val_file)], "validation.every": 2,
                 "validation.samples": {"n": 2, "max_new_tokens": 6}, "validation.answers": {"max_new_tokens": 6}, **kw}
    return RunConfig.model_validate(run_config(tiny_model, pairs_file, out, **overrides))


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_validation_pairs_are_refused_as_training_data(tiny_model, pairs_file, tmp_path):
    val = _write(tmp_path / "val.jsonl", _val_rows())
    cfg = RunConfig.model_validate(run_config(tiny_model, val, tmp_path / "out"))
    with pytest.raises(ValueError, match="validation pairs"):
        train(cfg, show_progress=False)
    shared = _write(tmp_path / "shared.jsonl", [{**r, "meta": {"split": "train"}} for r in make_pairs()[:3]])
    with pytest.raises(ValueError, match="both data.train and data.validation"):
        train(_cfg(tiny_model, pairs_file, shared, tmp_path / "o2"), show_progress=False)
    heldout = _write(tmp_path / "heldout.jsonl", [{**r, "meta": {"split": "heldout"}} for r in _val_rows()])
    with pytest.raises(ValueError, match="held-out"):
        train(_cfg(tiny_model, pairs_file, heldout, tmp_path / "o3"), show_progress=False)


def test_teacher_kl_is_zero_when_the_cued_prompt_is_the_clean_one(tiny_model, pairs_file, tmp_path):
    val = _write(tmp_path / "val.jsonl", _val_rows(same=True))
    cfg = _cfg(tiny_model, pairs_file, val, tmp_path / "out", **{"train.max_steps": 2})
    train(cfg, show_progress=False)
    records = _records(cfg.run_dir / "validation.jsonl")
    assert [r["step"] for r in records] == [0, 2]
    assert records[0]["val_teacher_kl"] == pytest.approx(0.0, abs=1e-6)  # the run-start student is the teacher
    assert records[1]["val_teacher_kl"] > 1e-6  # after training, on the same prompts, the student has moved


def test_the_measurement_is_the_same_for_every_method_and_changes_no_weight(tiny_model, pairs_file, tmp_path):
    val = _write(tmp_path / "val.jsonl", _val_rows())
    start = {}
    for method in ("opct", "bct"):
        cfg = _cfg(tiny_model, pairs_file, val, tmp_path / method, method=method)
        train(cfg, show_progress=False)
        records = _records(cfg.run_dir / "validation.jsonl")
        assert [r["step"] for r in records] == [0, 2, 4]
        start[method] = records[0]
        metrics = _records(cfg.run_dir / "metrics.jsonl")
        assert "val_teacher_kl" in metrics[1] and "val_teacher_kl" not in metrics[0]  # steps 2 and 4
        for row in metrics:
            assert {"entropy", "completion_len", "truncation_rate"} <= set(row) and row["entropy"] > 0
    for key in ("val_teacher_kl", "val_entropy", "val_completion_len"):
        assert start["opct"][key] == pytest.approx(start["bct"][key], rel=1e-5), key
    # measuring changes nothing that is trained
    plain = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path / "plain"))
    train(plain, show_progress=False)
    with_val = load_file(str(tmp_path / "opct" / "t" / "final" / "adapter_model.safetensors"))
    without = load_file(str(plain.run_dir / "final" / "adapter_model.safetensors"))
    assert all(torch.equal(with_val[k], without[k]) for k in without)


def test_family_validation_pairs_are_judged_apart_and_leave_teacher_kl_to_the_other_pairs(tiny_model, pairs_file, tmp_path):
    from opct.training.plugins import VALIDATION_JUDGES

    def by_flag(axis, metas, answers):  # a judge that reads the answer's pair: good on famval, bad elsewhere
        return [m["split"] == "famval" for m in metas]

    VALIDATION_JUDGES.register("test-famval", by_flag)
    val = _write(tmp_path / "val.jsonl", _val_rows())
    famval = _write(tmp_path / "famval.jsonl", [{**r, "id": f"f{i}", "meta": {"split": "famval"}}
                                                 for i, r in enumerate(_val_rows(same=True))])
    both = _cfg(tiny_model, pairs_file, val, tmp_path / "both", **{"train.max_steps": 2, "validation.judge": "test-famval"})
    both = RunConfig.model_validate({**both.model_dump(mode="json"), "data": {**both.data.model_dump(mode="json"),
                                                                             "validation": [str(val), str(famval)]}})
    only = _cfg(tiny_model, pairs_file, val, tmp_path / "only", **{"train.max_steps": 2, "validation.judge": "test-famval"})
    for cfg in (both, only):
        train(cfg, show_progress=False)
    with_fam, without = _records(both.run_dir / "validation.jsonl"), _records(only.run_dir / "validation.jsonl")
    assert with_fam[0]["famval_good"] == 1.0 and with_fam[0]["famval_scored/sycophancy"] == 6
    assert with_fam[0]["val_good"] == 0.0 and with_fam[0]["val_scored/sycophancy"] == 6
    assert "famval_good" not in without[0]
    for a, b in zip(with_fam, without, strict=True):  # teacher-KL is measured on the cluster validation pairs alone
        assert a["val_teacher_kl"] == pytest.approx(b["val_teacher_kl"], rel=1e-6)


def test_bct_truncation_is_measured_from_its_targets(tiny_model, pairs_file, tmp_path):
    short = RunConfig.model_validate(run_config(tiny_model, pairs_file, tmp_path / "s", method="bct",
                                                **{"bct.targets": {"max_new_tokens": 2}, "train.max_steps": 1,
                                                   "profile.pairs_per_axis": 8}))
    train(short, show_progress=False)
    rows = _records(short.run_dir / "metrics.jsonl")
    targets = [t for f in (short.run_dir / "bct_targets").glob("*.jsonl") for r in _records(f) for t in r["targets"]]
    assert all(len(t) <= 2 for t in targets)
    assert rows[0]["truncation_rate"] > 0  # a random tiny model rarely stops within two tokens
    profile = json.loads((short.run_dir / "diagnostics.json").read_text())  # the run-start profile, at the targets' length
    assert profile["max_new_tokens"] == 2 and profile["axes"]["sycophancy"]["truncated_targets"] > 0


def test_reverse_kl_and_entropy_match_a_hand_computation():
    torch.manual_seed(0)
    s, t = torch.randn(2, 3, 5), torch.randn(2, 3, 5)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    ps, pt = s.softmax(-1), t.softmax(-1)
    kl = (ps * (ps.log() - pt.log())).sum(-1)
    entropy = -(ps * ps.log()).sum(-1)
    assert reverse_kl_sum(s, t, mask, chunk_size=2) == pytest.approx(float((kl * mask).sum()), rel=1e-5)
    assert token_entropy_sum(s, mask, chunk_size=4) == pytest.approx(float((entropy * mask).sum()), rel=1e-5)
    assert reverse_kl_sum(s, s, mask) == pytest.approx(0.0, abs=1e-6)


def test_a_resumed_run_keeps_the_measurements_an_uninterrupted_run_makes(tiny_model, pairs_file, tmp_path):
    import shutil

    from run_helpers import interrupt

    val = _write(tmp_path / "val.jsonl", _val_rows())
    whole = _cfg(tiny_model, pairs_file, val, tmp_path / "whole", **{"train.keep_checkpoints": 4})
    train(whole, show_progress=False)
    expected = _records(whole.run_dir / "validation.jsonl")
    resumed = _cfg(tiny_model, pairs_file, val, tmp_path / "resumed", **{"train.keep_checkpoints": 4})
    shutil.copytree(whole.run_dir, resumed.run_dir)
    interrupt(resumed.run_dir, after_step=2)  # killed after step 2's checkpoint: step 4's record is a stale tail
    train(resumed, show_progress=False)
    got = _records(resumed.run_dir / "validation.jsonl")
    assert [r["step"] for r in got] == [0, 2, 4]
    assert got == expected  # the tail was cut, step 4 measured again, identically
