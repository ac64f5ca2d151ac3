"""The evaluation runner: records, resume after an interruption, never partial results."""

import json
from dataclasses import replace

import pytest

from opct.axes.capability.tasks import multiple_choice_task
from opct.config import ModelConfig
from opct.datasets.base import EvalItem
from opct.evals import run_task
from opct.models import load_model, load_tokenizer
from opct.sampling.engine import SamplingParams
from opct.sampling.hf_sampler import HFSampler


def _items(n=10):
    return [
        EvalItem(id=f"q{i}", prompt=[{"role": "user", "content": f"Question {i}? (A) x (B) y"}], meta={"answer": "AB"[i % 2], "letters": "AB"})
        for i in range(n)
    ]


class Interrupt(KeyboardInterrupt):
    pass


class Finished:
    """The tiny random model never ends within a few tokens: its answers are taken as finished ones here
    (a cut-off answer is ``truncated`` and never judged), so that the scorer runs."""

    def __init__(self, engine):
        self.engine = engine

    def generate(self, *args, **kwargs):
        return [replace(r, truncated=False) for r in self.engine.generate(*args, **kwargs)]


def test_records_resume_and_complete_results(tiny_model, tmp_path):
    tok = load_tokenizer(str(tiny_model))
    engine = Finished(HFSampler(load_model(ModelConfig(name_or_path=str(tiny_model))), tok))
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=6, seed=1)
    task = multiple_choice_task("mc", _items())
    calls = {"n": 0}
    real_score = task.score

    def flaky(unit, response):
        calls["n"] += 1
        if calls["n"] == 7:
            raise Interrupt
        return real_score(unit, response)

    task.score = flaky
    with pytest.raises(Interrupt):
        run_task(task, engine, tok, tmp_path, params, "tiny", batch_units=2)
    samples = tmp_path / "mc" / "samples.jsonl"
    written = [json.loads(line) for line in samples.read_text().splitlines()]
    # every sample judged before the interruption is on disk (empty answers are recorded unjudged)
    assert len([r for r in written if r["outcome"] != "empty"]) == 6
    assert not (tmp_path / "mc" / "results.json").exists()  # partial results are never reported

    task.score = real_score
    run_task(task, engine, tok, tmp_path, params, "tiny", batch_units=2)
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(records) == 20 and len({(r["item_id"], r["sample"]) for r in records}) == 20
    assert records[: len(written)] == written  # kept, not regenerated
    run_task(multiple_choice_task("mc", _items()), engine, tok, tmp_path / "fresh", params, "tiny", batch_units=3)
    fresh_records = [json.loads(line) for line in (tmp_path / "fresh" / "mc" / "samples.jsonl").read_text().splitlines()]
    key = lambda r: (r["item_id"], r["sample"])  # noqa: E731
    assert sorted(map(key, records)) == sorted(map(key, fresh_records))
    assert {key(r): r["response"] for r in records} == {key(r): r["response"] for r in fresh_records}

    out = json.loads((tmp_path / "mc" / "results.json").read_text())
    assert out["status"] in ("ok", "incomplete") and "complete" not in out and out["n"] == 10 and out["n_records"] == 20
    assert out["generation_config"]["n"] == 2 and out["data_hash"] and out["judges"] == ["mc-letter@1"]
    acc = out["metrics"]["accuracy"]
    expected = sum(r["scores"]["correct"] for r in records) / 20
    assert acc["value"] == pytest.approx(expected) and acc["n"] == 20 and acc["ci_low"] <= expected <= acc["ci_high"]
    for r in records:
        assert set(r) >= {"eval", "item_id", "variant", "split", "prompt", "response", "parsed", "judge", "judge_version", "scores", "ok"}
    again = run_task(task, engine, tok, tmp_path, params, "tiny")
    assert again.reused and again.metrics["accuracy"].value == pytest.approx(expected)
    other = run_task(task, engine, tok, tmp_path, SamplingParams(n=1, temperature=0.0, max_new_tokens=6), "tiny")
    assert not other.reused and other.n_records == 10
