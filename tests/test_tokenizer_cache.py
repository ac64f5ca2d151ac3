"""A tokenizer is parsed once per process, and no caller's change to it reaches another caller's load."""

from __future__ import annotations

import os

from opct.models import load_tokenizer


def test_the_same_files_give_the_same_tokenizer(tiny_model):
    first = load_tokenizer(str(tiny_model))
    assert load_tokenizer(str(tiny_model)) is first
    assert load_tokenizer(str(tiny_model), chat_template="{{ messages[0]['content'] }}!") is not first


def test_a_callers_change_is_never_given_to_the_next_caller(tiny_model):
    pristine = load_tokenizer(str(tiny_model))
    template, size, pad = pristine.chat_template, len(pristine), pristine.pad_token
    changes = [
        lambda t: setattr(t, "chat_template", None),
        lambda t: setattr(t, "padding_side", "right" if t.padding_side == "left" else "left"),
        lambda t: t.add_tokens(["<never-seen-token>"]),
        lambda t: t.add_special_tokens({"pad_token": "<another-pad>"}),
        lambda t: t._tokenizer.enable_truncation(max_length=3),
    ]
    for change in changes:
        given = load_tokenizer(str(tiny_model))
        side = given.padding_side
        change(given)
        fresh = load_tokenizer(str(tiny_model))
        assert fresh is not given
        assert (fresh.chat_template, len(fresh), fresh.pad_token, fresh.padding_side) == (template, size, pad, side)
        assert len(fresh("a b c d e f").input_ids) > 3


def test_rewritten_files_are_loaded_afresh(tiny_model, tmp_path):
    folder = tmp_path / "tok"
    load_tokenizer(str(tiny_model)).save_pretrained(folder)
    first = load_tokenizer(str(folder))
    config = folder / "tokenizer_config.json"
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert load_tokenizer(str(folder)) is not first
