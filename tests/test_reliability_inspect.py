"""opct under Inspect: ordinary errors are one line (no traceback), bad -T arguments are errors, and
an answer cut off at the token limit is ``truncated`` there too."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval

from opct.inspect_eval.bridge import SCORE_KEY
from opct.inspect_eval.errors import InspectError, one_line_hook
from opct.inspect_eval.registry import AXIS_TASKS, any_axis


def _printed_by_inspect(err: BaseException) -> str:
    """What ``inspect eval`` prints for ``err`` reaching the exception hook opct installs in front of
    Inspect's (a traceback, from the hook before it, unless it is an InspectError: its message alone)."""

    def traceback_hook(kind: type[BaseException], exc: BaseException, tb: object) -> None:
        print("Traceback (most recent call last): ...", file=sys.stderr)

    out = io.StringIO()
    with redirect_stderr(out):
        one_line_hook(traceback_hook)(type(err), err, err.__traceback__)
    return "".join(out.getvalue().split())  # rich wraps long lines, even inside a word


@pytest.mark.parametrize("bad, named", [
    ({"max_new_tokens": 0}, "-T max_new_tokens=0"),
    ({"max_new_tokens": -5}, "-T max_new_tokens=-5"),
    ({"epochs": 0}, "-T epochs=0"),
    ({"source": "bogus"}, "-T source='bogus'"),
    ({"split": "test"}, "-T split='test'"),
    ({"top_p": 0.0}, "-T top_p=0.0"),
    ({"max_unscored": 2}, "-T max_unscored=2"),
    ({"limit": 0}, "-T limit=0"),
])
def test_bad_task_arguments_are_one_line_errors_naming_them(bad: dict, named: str) -> None:
    """``-T max_new_tokens=0`` was read as "no limit" (512 tokens); a bad source was a pydantic traceback."""
    with pytest.raises(InspectError) as info:
        AXIS_TASKS["jailbreak"](**bad)
    err = info.value
    assert isinstance(err, InspectError) and err.exit_code == 2
    assert named in err.message and err.message.startswith("error: task opct/jailbreak:")
    assert _printed_by_inspect(err) == "".join(err.message.split()) and "\n" not in err.message


def test_missing_real_data_says_how_to_give_it_under_inspect() -> None:
    with pytest.raises(InspectError) as info:
        any_axis(axis="jailbreak", source="real")
    assert "-T real=" in info.value.message and "Traceback" not in _printed_by_inspect(info.value)


def test_a_model_the_provider_cannot_load_is_one_line(tmp_path: Path) -> None:
    from inspect_ai.model import get_model

    with pytest.raises(InspectError) as info:
        get_model("opct/organism", bogus=1)
    assert info.value.message.startswith("error: model opct/organism: -M bogus:") and "batch_size" in info.value.message
    missing = tmp_path / "no-such-model"
    with pytest.raises(InspectError) as info:
        get_model(f"opct/{missing}")
    assert str(missing) in info.value.message and _printed_by_inspect(info.value) == "".join(info.value.message.split())


def test_opct_debug_keeps_the_original_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPCT_DEBUG", "1")
    with pytest.raises(Exception) as info:
        AXIS_TASKS["jailbreak"](max_new_tokens=0)
    assert not isinstance(info.value, InspectError) and "max_new_tokens" in str(info.value)


def test_a_one_token_limit_is_truncated_and_incomplete_under_inspect(tmp_path: Path) -> None:
    (log,) = inspect_eval(AXIS_TASKS["sycophancy"](limit=2, max_new_tokens=1), model="opct/organism", log_dir=str(tmp_path),
                          display="none")
    assert log.status == "success", log.error
    records = [s.scores[SCORE_KEY].metadata["opct_record"] for s in log.samples]
    # judged on the one token they show, which is no answer: truncated, in no rate
    assert records and all(r["outcome"] == "truncated" and r["truncated"] and r["scores"] == {} for r in records)
    metrics = {k: v for score in log.results.scores for k, v in score.metrics.items()}
    assert metrics["incomplete"].value == 1.0 and metrics["unscored"].value == len(records)
    assert json.dumps(records)  # plain data
