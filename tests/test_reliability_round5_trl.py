"""Issue 73, "A TRL user's second day": TRL's own SDFT data read as it is, a hint for every TRL name on
docs/from-trl.md (and none that is wrong), the names whose meaning differs say so, and a method switch that
keeps what applies to the new method or names each key it drops."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from conftest import run_config
from typer.testing import CliRunner

from opct.cli.main import app
from opct.pairs import (
    PairFileError,
    TeacherPromptBuiltWarning,
    derived_pair_id,
    read_pairs,
    sdft_teacher_prompt,
)


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _read_quietly(path: Path, **kw) -> tuple[list, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = read_pairs(path, **kw)
    return pairs, list(caught)


# ---- 1. TRL's SDFT rows: prompt + privileged_context -------------------------------------------------------


def test_trls_sdft_rows_read_with_the_teacher_prompt_trl_builds_and_one_line_says_so(tmp_path):
    """The probe's file: 20 rows of prompt + privileged_context (gave 20 x "teacher_prompt: missing")."""
    rows = [{"prompt": f"What is {i} + {i}?", "privileged_context": f"The answer is {2 * i}."} for i in range(20)]
    pairs, caught = _read_quietly(_jsonl(tmp_path / "sdft.jsonl", rows))
    assert len(pairs) == 20
    assert pairs[3].prompt == [{"role": "user", "content": "What is 3 + 3?"}]
    assert pairs[3].teacher_prompt == [{"role": "user", "content": "What is 3 + 3?\n\nThe answer is 6."}]
    said = [str(w.message) for w in caught if issubclass(w.category, TeacherPromptBuiltWarning)]
    assert said == [f"{tmp_path / 'sdft.jsonl'}: built teacher_prompt for 20 of 20 pairs from prompt + "
                    "privileged_context, as TRL's SDFTTrainer does: the last user turn, a blank line, the privileged "
                    "context"]
    assert pairs[3].id == derived_pair_id(pairs[3].prompt, pairs[3].teacher_prompt)


def test_a_conversational_prompt_keeps_its_turns_and_the_context_joins_the_last_user_turn(tmp_path):
    """TRL's conversational rows: every turn but the last kept; the last user turn's text fills the template;
    a context given as messages is their texts joined by newlines (content parts: text parts joined by spaces)."""
    rows = [{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi."},
                        {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Capital of {France}?"}],
             "privileged_context": [{"role": "assistant", "content": "Paris."},
                                    {"role": "user", "content": [{"type": "text", "text": "It is"},
                                                                 {"type": "image"}, {"type": "text", "text": "old."}]},
                                    {"role": "user", "content": ""}]},
            {"prompt": "Mixed file?", "teacher_prompt": "own teacher prompt"}]
    pairs, caught = _read_quietly(_jsonl(tmp_path / "conv.jsonl", rows))
    assert pairs[0].teacher_prompt == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Capital of {France}?\n\nParis.\nIt is old."},  # braces kept as written
    ]
    assert pairs[0].prompt[-1] == {"role": "user", "content": "Capital of {France}?"}
    assert pairs[1].teacher_prompt == [{"role": "user", "content": "own teacher prompt"}]
    assert any("built teacher_prompt for 1 of 2 pairs" in str(w.message) for w in caught)


def test_sdft_rows_under_other_field_names_map_with_data_columns(tmp_path):
    rows = [{"question": "Q?", "hint": "H."}]
    pairs, _ = _read_quietly(_jsonl(tmp_path / "m.jsonl", rows), columns={"prompt": "question", "privileged_context": "hint"})
    assert pairs[0].teacher_prompt == [{"role": "user", "content": "Q?\n\nH."}]


def test_malformed_sdft_rows_are_refused_naming_file_line_and_field(tmp_path):
    rows = [
        {"prompt": "ok", "privileged_context": "fine"},
        {"prompt": "x", "privileged_context": "   "},  # 2: would train nothing
        {"prompt": "x", "privileged_context": 3},  # 3: neither text nor messages
        {"prompt": "x", "privileged_context": "c", "teacher_prompt": "t"},  # 4: which one?
        {"prompt": [{"role": "user", "content": "q"}, {"role": "system", "content": "s"}], "privileged_context": "c"},  # 5
        {"prompt": "x"},  # 6: neither teacher_prompt nor privileged_context
        {"prompt": [{"role": "robot", "content": "q"}], "privileged_context": []},  # 7: both bad, both named
        {"prompt": [{"role": "user", "content": [{"type": "text", "text": "q"}]}], "privileged_context": "c"},  # 8
    ]
    path = _jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(PairFileError) as info:
        read_pairs(path)
    found = {(p.line, p.field): p.message for p in info.value.problems}
    assert set(found) == {(2, "privileged_context"), (3, "privileged_context"), (4, "privileged_context"),
                          (5, "prompt[1].role"), (6, "teacher_prompt"), (7, "prompt[0].role"),
                          (7, "privileged_context"), (8, "prompt[0].content")}
    assert "would train nothing" in found[(2, "privileged_context")]
    assert "got int" in found[(3, "privileged_context")]
    assert "keep one of the two fields" in found[(4, "privileged_context")]
    assert "must end with one" in found[(5, "prompt[1].role")]
    assert found[(6, "teacher_prompt")] == "missing required field (or 'privileged_context', TRL's SDFT format)"
    assert "list of content parts" in found[(8, "prompt[0].content")]
    assert f"{path}:3: privileged_context: must be a string" in str(info.value)


def test_the_builder_alone_fills_a_text_prompt_as_trls_template_does():
    assert sdft_teacher_prompt("P {x}", "C {y}") == "P {x}\n\nC {y}"


def test_pairs_validate_says_what_it_built(tmp_path):
    path = _jsonl(tmp_path / "sdft.jsonl", [{"prompt": f"q{i}", "privileged_context": f"c{i}"} for i in range(3)])
    with pytest.warns(TeacherPromptBuiltWarning, match=r"built teacher_prompt for 3 of 3 pairs from prompt \+ privileged_context"):
        result = CliRunner().invoke(app, ["pairs", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "3 valid pairs" in result.output


def test_an_sdft_file_trains_exactly_as_the_file_of_the_teacher_prompts_it_stands_for(tiny_model, tmp_path):
    """The same run on TRL's rows and on rows with the built teacher_prompt written out: the same losses."""
    from conftest import make_pairs

    from opct.config import RunConfig
    from opct.training.loop import train

    base = [{"prompt": p["prompt"], "context": f"The answer is {p['meta']['answer']}."} for p in make_pairs()]
    sdft = _jsonl(tmp_path / "sdft.jsonl", [{"prompt": r["prompt"], "privileged_context": r["context"]} for r in base])
    plain = _jsonl(tmp_path / "plain.jsonl", [
        {"prompt": r["prompt"], "teacher_prompt": [{"role": "user", "content": f"{r['prompt'][0]['content']}\n\n{r['context']}"}]}
        for r in base])
    losses = []
    for name, data in (("sdft", sdft), ("plain", plain)):
        cfg = RunConfig.model_validate(run_config(tiny_model, data, tmp_path, name=name, **{"train.max_steps": 1}))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train(cfg, show_progress=False)
        rows = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
        losses.append([(r["loss"], r["kl_to_teacher"]) for r in rows])
    assert losses[0] == losses[1] and len(losses[0]) == 1
