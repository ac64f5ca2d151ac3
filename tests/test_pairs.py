import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opct.cli.main import app
from opct.pairs import ConsistencyPair, PairFileError, read_pairs, summarize_pairs, write_pairs


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_every_problem_is_reported_with_file_line_and_field(tmp_path):
    good = {"id": "a", "prompt": "hi", "teacher_prompt": "hello"}
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({"id": "b", "teacher_prompt": "x"}),
        json.dumps({"id": "c", "prompt": "  ", "teacher_prompt": "x"}),
        json.dumps({"id": "d", "prompt": [{"role": "robot", "content": "x"}], "teacher_prompt": "x"}),
        json.dumps({"id": "a", "prompt": "again", "teacher_prompt": "x"}),
        json.dumps({"id": "e", "prompt": [{"role": "user", "content": ""}], "teacher_prompt": "x"}),
        json.dumps({"id": "f", "prompt": "x", "teacher_prompt": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}),
        json.dumps(["not", "an", "object"]),
    ]
    path = _write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(PairFileError) as info:
        read_pairs(path)
    found = {(p.line, p.field) for p in info.value.problems}
    assert (2, "") in found  # malformed JSON
    assert (3, "prompt") in found  # missing
    assert (4, "prompt") in found  # empty
    assert (5, "prompt[0].role") in found  # wrong role
    assert (6, "id") in found  # duplicate id
    assert (7, "prompt[0].content") in found  # empty content
    assert (8, "teacher_prompt") in found  # ends with assistant
    assert (9, "") in found  # not an object
    assert len(info.value.problems) == 8
    text = str(info.value)
    assert f"{path}:6: id: duplicate id 'a' (first seen on line 1)" in text


def test_string_prompts_become_user_messages_and_roundtrip(tmp_path):
    pairs = [
        ConsistencyPair(id="x1", prompt=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], teacher_prompt=[{"role": "user", "content": "t"}], axis="jailbreak", meta={"split": "train"}),
    ]
    path = write_pairs(pairs, tmp_path / "out.jsonl")
    assert read_pairs(path) == pairs
    raw = _write(tmp_path / "s.jsonl", [json.dumps({"id": 7, "prompt": "plain", "teacher_prompt": "clean"})])
    (p,) = read_pairs(raw)
    assert p.id == "7" and p.prompt == [{"role": "user", "content": "plain"}] and p.axis == ""


def test_hf_dataset_with_column_mapping(tmp_path):
    import datasets

    ds = datasets.Dataset.from_list(
        [{"uid": "q1", "biased": "I think B. Q?", "clean": "Q?", "kind": "sycophancy"}, {"uid": "q2", "biased": "x", "clean": "y", "kind": "sycophancy"}]
    )
    ds.save_to_disk(str(tmp_path / "ds"))
    pairs = read_pairs(tmp_path / "ds", columns={"id": "uid", "prompt": "biased", "teacher_prompt": "clean", "axis": "kind"})
    assert [p.id for p in pairs] == ["q1", "q2"]
    assert pairs[0].prompt[0]["content"] == "I think B. Q?" and pairs[0].axis == "sycophancy"
    bad = datasets.Dataset.from_list([{"uid": "q1", "biased": "", "clean": "y"}])
    bad.save_to_disk(str(tmp_path / "bad"))
    with pytest.raises(PairFileError) as info:
        read_pairs(tmp_path / "bad", columns={"id": "uid", "prompt": "biased", "teacher_prompt": "clean"})
    assert info.value.problems[0].field == "biased" and info.value.problems[0].line == 1


def test_summary_counts_and_token_percentiles(tmp_path, tiny_model):
    from opct.models import load_tokenizer

    rows = [{"id": f"i{i}", "axis": "jailbreak" if i % 2 else "awareness", "prompt": "a " * (i + 1), "teacher_prompt": "b", "meta": {"split": "train"}} for i in range(10)]
    path = _write(tmp_path / "p.jsonl", [json.dumps(r) for r in rows])
    s = summarize_pairs(read_pairs(path), load_tokenizer(str(tiny_model)))
    assert s.by_axis_split == {("awareness", "train"): 5, ("jailbreak", "train"): 5}
    assert s.token_percentiles["prompt"][100] > s.token_percentiles["prompt"][50] > s.token_percentiles["teacher_prompt"][50]


def test_cli_validate_reports_problems_and_summary(tmp_path, pairs_file):
    runner = CliRunner()
    ok = runner.invoke(app, ["pairs", "validate", str(pairs_file)])
    assert ok.exit_code == 0, ok.output
    assert "16 valid pairs" in " ".join(ok.output.split()) and "sycophancy" in ok.output
    bad = _write(tmp_path / "bad.jsonl", ['{"id": "a"}'])
    res = runner.invoke(app, ["pairs", "validate", str(bad)])
    assert res.exit_code == 1
    assert "bad.jsonl:1: prompt: missing required field" in res.output


def test_cli_validate_flags_prompts_that_fill_the_context(tmp_path, tiny_model):
    """With --tokenizer, a prompt as long as the model's context (512 positions here) is a problem."""
    import json

    from typer.testing import CliRunner

    from opct.cli.main import app

    path = tmp_path / "long.jsonl"
    rows = [{"id": "short", "prompt": "What is 2 + 2?", "teacher_prompt": "What is 2 + 2?"},
            {"id": "long", "prompt": "bread " * 2000, "teacher_prompt": "What is 2 + 2?"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = CliRunner().invoke(app, ["pairs", "validate", str(path), "--tokenizer", str(tiny_model)])
    assert res.exit_code == 1
    assert "1 prompt(s) fill the model's 512-token context" in res.output and "pair long: prompt is" in res.output
    assert "pair short" not in res.output


def test_trl_style_pairs_without_id_get_a_stable_derived_id_said_once(tmp_path):
    """A file of ``prompt``/``teacher_prompt`` only (TRL's layout) reads; each id is a hash of the pair,
    the same in another file and another order, and one warning says so for the whole file."""
    import warnings

    from opct.pairs import DerivedPairIdWarning, derived_pair_id

    rows = [{"prompt": "I think B. Q1?", "teacher_prompt": "Q1?"}, {"prompt": "I think C. Q2?", "teacher_prompt": "Q2?"},
            {"id": "own", "prompt": "x", "teacher_prompt": "y"}]
    path = _write(tmp_path / "p.jsonl", [json.dumps(r) for r in rows])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = read_pairs(path)
    said = [w for w in caught if issubclass(w.category, DerivedPairIdWarning)]
    assert len(said) == 1 and "2 of 3 pairs have no 'id'" in str(said[0].message)
    first = derived_pair_id([{"role": "user", "content": "I think B. Q1?"}], [{"role": "user", "content": "Q1?"}])
    assert pairs[0].id == first and first.startswith("pair-") and len(first) == len("pair-") + 16
    assert pairs[2].id == "own" and pairs[0].id != pairs[1].id
    reordered = _write(tmp_path / "q.jsonl", [json.dumps(r) for r in reversed(rows)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert {p.id for p in read_pairs(reordered)} == {p.id for p in pairs}
        swapped = _write(tmp_path / "s.jsonl", [json.dumps({"prompt": "Q1?", "teacher_prompt": "I think B. Q1?"})])
        assert read_pairs(swapped)[0].id != first  # the two sides are not interchangeable


def test_the_same_pair_twice_without_ids_is_a_duplicate(tmp_path):
    row = json.dumps({"prompt": "a", "teacher_prompt": "b"})
    with pytest.raises(PairFileError) as info:
        read_pairs(_write(tmp_path / "d.jsonl", [row, row]))
    assert "d.jsonl:2: id: the same prompts as the pair 'pair-" in str(info.value) and "first seen on line 1" in str(info.value)
