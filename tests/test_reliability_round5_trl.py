"""Issue 73, "A TRL user's second day": TRL's own SDFT data read as it is, a hint for every TRL name on
docs/from-trl.md (and none that is wrong), the names whose meaning differs say so, and a method switch that
keeps what applies to the new method or names each key it drops."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from conftest import REPO, run_config
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
    assert "3 valid pairs" in " ".join(result.output.split())  # the terminal wraps a long path's line


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


# ---- 2. a hint for every TRL name on docs/from-trl.md, and none that is wrong ----------------------------------

PAGE = REPO / "docs" / "from-trl.md"


def _page_rows() -> dict[str, str]:
    """Every TRL name of the page's tables -> its row's opct cell."""
    rows: dict[str, str] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = line.split("|")
        if len(cells) < 4 or line.startswith(("| TRL", "|---")):
            continue
        for name in re.findall(r"`([a-z_0-9]+)`", cells[1]):
            rows[name] = cells[2].strip()
    return rows


def _status(text: str) -> str:
    return next((s for s in ("not available", "not needed") if text.startswith(s)), "a setting")


def _dotted(text: str) -> set[str]:
    return {k for k in re.findall(r"\b[a-z_]+(?:\.[a-z_]+)+\b", text) if not k.endswith((".jsonl", ".gz", ".md", ".yaml"))}


def test_the_page_lists_every_name_of_the_probe():
    """The probe counted 90 names (29 without a hint); the page now also has the 23 SDFTConfig fields."""
    rows = _page_rows()
    assert len(rows) >= 90 + 23
    for name in ("load_in_4bit", "packing", "top_k", "distillation_topk", "num_loss_tokens_to_skip", "vllm_server_port"):
        assert name in rows


@pytest.mark.parametrize("name", sorted(_page_rows()))
def test_every_trl_name_on_the_page_gets_the_pages_hint(name):
    """``--set NAME=1`` names what the page's row names (its opct keys), or says, as the row does, that opct has
    no such setting; a TRL name that is also opct's own top-level key (seed, output_dir) is simply accepted."""
    from opct.config import ConfigError, RunConfig, load_config

    cell = _page_rows()[name]
    if name == "optim":  # opct's optimizer section: TRL's value there gets the note of what optim is in opct
        with pytest.raises(ConfigError, match=r"^--set optim=adamw_torch: optim: .*optim is opct's optimizer "
                                              r"section .*TRL's optim, the optimizer's name, is not needed"):
            load_config(None, ["optim=adamw_torch"])
        return
    if name in RunConfig.model_fields:
        assert cell.startswith(f"`{name}`")
        load_config(None, [f"{name}={'runs' if name == 'output_dir' else 1}"])
        return
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"{name}=1"])
    message = str(info.value)
    prefix = f"--set {name}=1: {name}: unknown key; `{name}` is TRL's name: in opct it is "
    assert message.startswith(prefix), message
    hint = message[len(prefix):]
    assert _status(hint) == _status(cell), (hint, cell)
    missing = _dotted(cell) - _dotted(hint)
    assert not missing, f"the page names {missing} for {name}; the hint does not: {hint}"


def test_top_k_gets_no_hint_towards_top_p():
    """The probe: `--set top_k=50` suggested opct.sampling.top_p (a near spelling) while the page says top_k is
    not available; opct has no top-k sampling (its ratio is against the temperature / top-p distribution)."""
    from opct.config import ConfigError, load_config

    for name in ("top_k", "min_p", "repetition_penalty"):
        with pytest.raises(ConfigError) as info:
            load_config(None, [f"opct.sampling.{name}=50"])
        assert f"`{name}` is TRL's name: in opct it is not available" in str(info.value)
        assert "did you mean" not in str(info.value)


# ---- 3. names that meet an opct setting doing something else say so ------------------------------------------


def test_beta_says_kl_coef_is_the_whole_objective_not_a_penalty_beside_a_reward():
    from opct.config import ConfigError, load_config

    with pytest.raises(ConfigError) as info:
        load_config(None, ["beta=0.04"])
    message = str(info.value)
    assert "opct.loss.kl_coef, which does something else" in message
    assert "GRPO's beta (default 0.0)" in message and "(default 1.0)" in message and "0 or below is refused" in message
    assert "opct.loss.jsd_beta" in message  # GKD's beta


def test_loss_type_says_it_means_another_thing():
    from opct.config import ConfigError, load_config

    with pytest.raises(ConfigError) as info:
        load_config(None, ["loss_type=dapo"])
    message = str(info.value)
    assert "no counterpart, it means another thing" in message and "how token losses are averaged" in message
    assert "opct.loss.kind" in message and "opct.loss.policy_loss" in message


@pytest.mark.parametrize("overrides, says", [
    (["warmup_ratio=0.1"], "a whole number of steps, not a share of the run"),
    (["optim.warmup_steps=0.1"], "optim.warmup_steps is a whole number of steps: transformers 5 reads a warmup_steps "
                                 "below 1 as a share of the run"),
    (["opct.loss.kl_coef=high"], "opct.loss.kl_coef is not GRPO's beta"),
])
def test_a_problem_where_a_trl_name_meets_an_opct_key_says_how_they_differ(overrides, says):
    """warmup_ratio is gone in transformers 5.25, whose warmup_steps below 1 is the share: opct refuses
    optim.warmup_steps: 0.1 and says why; a problem with kl_coef's value says it is not GRPO's beta."""
    from opct.config import ConfigError, load_config

    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    first = str(info.value).splitlines()[0]
    assert overrides[0].split("=")[0].split(".")[-1] in first and says in first


def test_a_key_no_trl_name_meets_gets_no_note():
    from opct.config import ConfigError, load_config
    from opct.config.trl_names import meaning_note

    assert meaning_note(("optim", "lr")) == "" and meaning_note(("train", "warmup_steps", "x")) == ""
    with pytest.raises(ConfigError) as info:
        load_config(None, ["optim.lr=fast"])
    assert "TRL" not in str(info.value) and "docs/from-trl.md" not in str(info.value)


# ---- 4. a method switch keeps what applies to the new method, or names each key it drops ---------------------


def _switched(path: Path, overrides: list[str]) -> tuple[object, str]:
    from opct.config import load_config
    from opct.config.method_switch import MethodSwitchWarning

    with pytest.warns(MethodSwitchWarning) as caught:
        cfg = load_config(path, overrides)
    (note,) = [str(w.message) for w in caught if issubclass(w.category, MethodSwitchWarning)]
    return cfg, note


def test_method_bct_keeps_the_users_16_token_limit(tmp_path):
    """The probe: --method bct dropped opct.sampling.max_new_tokens: 16, and BCT's targets ran to 1,024."""
    path = tmp_path / "run.yaml"
    path.write_text("name: x\nopct:\n  sampling: {max_new_tokens: 16}\n")
    cfg, note = _switched(path, ["method=bct"])
    assert cfg.method_config.targets.max_new_tokens == 16
    assert note == "method switched from opct to bct: kept opct.sampling.max_new_tokens=16 as bct.targets.max_new_tokens"
    with pytest.warns(UserWarning, match="kept opct.sampling.max_new_tokens=16"):
        result = CliRunner().invoke(app, ["train", "-c", str(path), "--method", "bct", "--print-config"])
    assert result.exit_code == 0, result.output
    assert "max_new_tokens: 16" in result.output and "max_new_tokens: 1024" not in result.output.split("bct:")[1]


# every key of the two generation sections, set away from both methods' defaults
SAMPLING = {"n": 5, "temperature": 0.7, "top_p": 0.9, "max_new_tokens": 16, "min_new_tokens": 2,
            "sequences_per_call": 7, "decoder": "plain"}


@pytest.mark.parametrize("old, new", [("opct", "bct"), ("bct", "opct"), ("opct", "act"), ("bct", "act"),
                                      ("act", "opct")])
def test_a_switch_keeps_every_key_that_applies_or_names_it(old, new, tmp_path):
    """By class: after a switch, every key the file set for the old method either has the same value in the new
    method's settings or is named in the note with its value; the length, memory and engine keys are kept."""
    import yaml

    from opct.config.method_switch import CARRIED

    section = {"opct": {"sampling": SAMPLING, "loss": {"kind": "topk", "topk": 4}, "teacher_temperature": 0.5},
               "bct": {"targets": {**SAMPLING, "per_axis": {"awareness": {"n": 2}}}},
               "act": {"layers": [0, -1]}}[old]
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "method": old, old: section}))
    cfg, note = _switched(path, [f"method={new}"])
    new_settings = cfg.method_config.model_dump()
    generation = next((v for v in new_settings.values() if isinstance(v, dict) and "max_new_tokens" in v), None)
    for key, value in section.items():
        leaves = value.items() if isinstance(value, dict) and key in ("sampling", "targets") else [(None, value)]
        for sub, sub_value in leaves:
            dotted = f"{old}.{key}.{sub}" if sub else f"{old}.{key}"
            kept, _, dropped = note.partition("dropped ")
            if generation is not None and sub in CARRIED:
                assert generation[sub] == sub_value and f"{dotted}={sub_value} as " in kept, (dotted, note)
            else:
                assert f"{dotted}" in dropped, (dotted, note)
    assert ("kept " in note) == (generation is not None and old != "act")
    if generation is not None and old != "act":  # what applies to any generating method: length, memory, decoder
        assert {k: generation[k] for k in ("max_new_tokens", "min_new_tokens", "sequences_per_call", "decoder")} == \
               {"max_new_tokens": 16, "min_new_tokens": 2, "sequences_per_call": 7, "decoder": "plain"}
        assert generation["n"] != 5 and generation["temperature"] != 0.7  # the new method's own recipe


def test_a_key_the_command_line_sets_for_the_new_method_wins_and_the_note_says_so(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("name: x\nopct:\n  sampling: {max_new_tokens: 16}\n")
    cfg, note = _switched(path, ["method=bct", "bct.targets.max_new_tokens=64"])
    assert cfg.method_config.targets.max_new_tokens == 64
    assert "dropped opct.sampling.max_new_tokens=16 (bct.targets.max_new_tokens=64 is set)" in note
