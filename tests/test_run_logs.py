"""Appended logs survive an interrupted write: ``metrics.jsonl`` and ``rollouts.jsonl.gz`` cut at any byte
are brought back to their last complete record on resume, with a warning saying what was dropped."""

from __future__ import annotations

import gzip
import json
import random
import warnings

import pytest
from run_helpers import Trained, adapter, assert_same_weights, metrics, train_reference

from opct.training.loop import train


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory) -> Trained:
    return train_reference(tiny_model, tmp_path_factory.mktemp("trained"))


def _recover(path, last_step: int) -> list[str]:
    from opct.runs.logs import recover_log

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recover_log(path, last_step)
    return [str(w.message) for w in caught]


def test_a_jsonl_log_cut_at_every_byte_keeps_its_complete_records(tmp_path):
    lines = [json.dumps({"step": i, "loss": 0.25 * i, "note": "é" * i}, ensure_ascii=False) + "\n" for i in range(1, 7)]
    data = "".join(lines).encode()
    ends = [len("".join(lines[: i + 1]).encode()) for i in range(len(lines))]
    path = tmp_path / "metrics.jsonl"
    for cut in range(len(data) + 1):
        path.write_bytes(data[:cut])
        messages = _recover(path, last_step=4)
        complete = sum(e <= cut for e in ends)
        assert path.read_text(encoding="utf-8") == "".join(lines[: min(complete, 4)]), cut
        partial = cut - (ends[complete - 1] if complete else 0)
        if partial:
            assert len(messages) == 1 and f"1 incomplete record ({partial} bytes)" in messages[0], (cut, messages)
        else:
            assert messages == [], (cut, messages)


def test_a_jsonl_log_with_an_unreadable_line_keeps_the_records_before_it(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\nnot json\n{"step": 3}\n', encoding="utf-8")
    (message,) = _recover(path, last_step=5)
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n'
    assert "2 records" in message and "line 3" in message


def _gzip_log(path, steps: int, per_step: int) -> list[int]:
    """Append one gzip member per step, as the trainer does; return the file size after each step."""
    ends = []
    for step in range(1, steps + 1):
        with gzip.open(path, "at", encoding="utf-8") as fh:
            for j in range(per_step):
                fh.write(json.dumps({"step": step, "completion": f"réponse {step}.{j} " * (j + 1)}) + "\n")
        ends.append(path.stat().st_size)
    return ends


def test_a_gzip_log_cut_at_every_byte_keeps_its_complete_members(tmp_path):
    path = tmp_path / "rollouts.jsonl.gz"
    ends = _gzip_log(path, steps=5, per_step=3)
    data = path.read_bytes()
    for cut in range(len(data) + 1):
        path.write_bytes(data[:cut])
        messages = _recover(path, last_step=4)
        complete = sum(e <= cut for e in ends)
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            steps = [json.loads(line)["step"] for line in fh]
        assert steps == [s for s in range(1, min(complete, 4) + 1) for _ in range(3)], cut
        partial = cut - (ends[complete - 1] if complete else 0)
        if partial:
            assert len(messages) == 1 and f"incomplete gzip member ({partial} bytes" in messages[0], (cut, messages)
        else:
            assert messages == [], (cut, messages)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", ["metrics.jsonl", "rollouts.jsonl.gz"])
def test_a_run_whose_log_was_cut_resumes(trained, tmp_path, name, seed):
    """Killed after step 2's checkpoint with the log cut at a random byte: the resume repairs the log."""
    cfg = trained.copy(tmp_path, after_step=2)
    path = cfg.run_dir / name
    data = path.read_bytes()
    cut = random.Random(seed).randrange(1, len(data))
    path.write_bytes(data[:cut])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(cfg, show_progress=False)
    assert any("incomplete" in str(w.message) and name in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert_same_weights(adapter(cfg.run_dir), trained.reference)
    steps = [r["step"] for r in metrics(cfg.run_dir)]
    if name == "metrics.jsonl":
        ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
        kept = min(sum(e <= cut for e in ends), 2)  # whole lines before the cut, up to the checkpoint's step
        assert steps == [*range(1, kept + 1), 3, 4]
    else:
        assert steps == [1, 2, 3, 4]
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            rollouts = [json.loads(line)["step"] for line in fh]
        assert rollouts == sorted(rollouts) and rollouts[-1] == 4 and rollouts.count(3) == rollouts.count(4) > 0
