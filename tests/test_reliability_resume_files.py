"""Files cut by a kill are never dropped in silence: an eval's cut sample line on resume, an experiment's
cut manifest on a rerun; and an eval's ``results.json`` records the sha256 of the samples it counted."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from opct.axes.capability.tasks import multiple_choice_task
from opct.config import ModelConfig
from opct.datasets.base import EvalItem
from opct.evals import run_task
from opct.experiments.runner import load_experiment
from opct.models import load_model, load_tokenizer
from opct.sampling.engine import SamplingParams
from opct.sampling.hf_sampler import HFSampler

DEMO = Path(__file__).resolve().parents[1] / "opct" / "experiments" / "organism_demo.yaml"


class Finished:
    """The tiny random model's answers taken as finished ones, so that they are judged."""

    def __init__(self, engine):
        self.engine = engine

    def generate(self, *args, **kwargs):
        return [replace(r, truncated=False) for r in self.engine.generate(*args, **kwargs)]


def test_a_cut_sample_line_is_dropped_with_a_warning_and_the_hash_is_recorded(tiny_model: Path, tmp_path: Path) -> None:
    tok = load_tokenizer(str(tiny_model))
    engine = Finished(HFSampler(load_model(ModelConfig(name_or_path=str(tiny_model))), tok))
    items = [EvalItem(id=f"q{i}", prompt=[{"role": "user", "content": f"Q {i}? (A) x (B) y"}], meta={"answer": "A", "letters": "AB"})
             for i in range(4)]
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=4, seed=1)
    run_task(multiple_choice_task("mc", items), engine, tok, tmp_path, params, "tiny")
    samples, results = tmp_path / "mc" / "samples.jsonl", tmp_path / "mc" / "results.json"
    assert json.loads(results.read_text())["samples_sha256"] == hashlib.sha256(samples.read_bytes()).hexdigest()
    results.unlink()  # as if killed before the results: the last line cut mid-record
    samples.write_bytes(samples.read_bytes()[:-20])
    with pytest.warns(UserWarning, match=r"samples\.jsonl: dropped 1 line\(s\) from line 4 on"):
        again = run_task(multiple_choice_task("mc", items), engine, tok, tmp_path, params, "tiny")
    assert again.n_records == 4 and len(samples.read_text().splitlines()) == 4


def test_a_cut_experiment_manifest_is_replaced_with_a_warning(tmp_path: Path) -> None:
    from opct.experiments.runner import write_experiment_manifest

    cfg = load_experiment(DEMO)
    write_experiment_manifest(tmp_path, cfg)
    first = json.loads((tmp_path / "manifest.json").read_text())
    write_experiment_manifest(tmp_path, cfg)  # a rerun keeps the first start
    assert json.loads((tmp_path / "manifest.json").read_text())["created"] == first["created"]
    text = (tmp_path / "manifest.json").read_text()
    (tmp_path / "manifest.json").write_text(text[: len(text) // 2])
    with pytest.warns(UserWarning, match=r"manifest\.json could not be read \(cut or edited\)"):
        write_experiment_manifest(tmp_path, cfg)
    assert json.loads((tmp_path / "manifest.json").read_text())["kind"] == "experiment"
