"""BCT's per-axis target settings (``bct.targets.per_axis``): each axis's targets as the frozen model makes
them at that axis's settings, every target one SFT example, the cache keyed by the settings, exact resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import make_pairs, run_config
from safetensors.torch import load_file

from opct.config import ConfigError, RunConfig, load_config
from opct.training.loop import train

SAMPLED_AWARENESS = {"awareness": {"n": 3, "temperature": 1.0}}


def _mixed_pairs(path: Path) -> Path:
    """Sixteen pairs, every other one on the awareness axis."""
    rows = make_pairs()
    for i, row in enumerate(rows):
        if i % 2:
            row["axis"] = "awareness"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _cfg(tiny_model: Path, pairs: Path, out: Path, per_axis: dict | None, **kw) -> RunConfig:
    targets = {"max_new_tokens": 8, **({"per_axis": per_axis} if per_axis is not None else {})}
    return RunConfig.model_validate(run_config(tiny_model, pairs, out, method="bct", **{"bct.targets": targets, **kw}))


def _cached_targets(run_dir: Path) -> dict[str, list[list[int]]]:
    (cache,) = (run_dir / "bct_targets").glob("*.jsonl")
    return {r["id"]: r["targets"] for r in map(json.loads, cache.read_text().splitlines())}


def test_per_axis_keys_replace_only_what_they_name_and_unknown_keys_are_refused():
    targets = load_config(None, ["method=bct", "bct.targets.max_new_tokens=9",
                                 "bct.targets.per_axis={awareness: {n: 3, temperature: 1.0}}"]).method_config.targets
    aware, other = targets.for_axis("awareness"), targets.for_axis("sycophancy")
    assert (aware.n, aware.temperature, aware.top_p, aware.max_new_tokens) == (3, 1.0, 1.0, 9)
    assert (other.n, other.temperature, other.max_new_tokens) == (1, 0.0, 9) and aware.per_axis == {}
    with pytest.raises(ConfigError, match="max_new_tokens"):
        load_config(None, ["method=bct", "bct.targets.per_axis={awareness: {max_new_tokens: 3}}"])
    with pytest.raises(ConfigError, match="temperature"):
        load_config(None, ["method=bct", "bct.targets.per_axis={awareness: {temperature: -1}}"])


def test_shipped_organism_configs_sample_awareness_targets_as_the_official_code_does():
    for path in ("configs/organism_bct.yaml", "opct/experiments/organism_demo.yaml"):
        text = Path(__file__).resolve().parents[1].joinpath(path).read_text()
        assert "per_axis: {awareness: {n: 3, temperature: 1.0}}" in text, path
    demo = load_config("configs/organism_bct.yaml", []).method_config.targets
    assert demo.for_axis("awareness").n == 3 and demo.for_axis("sycophancy").temperature == 0.0


def test_awareness_targets_are_sampled_others_greedy_and_the_loss_is_sft_over_every_target(tiny_model, tmp_path):
    from opct.models import load_model, load_tokenizer, render_prompt
    from opct.pairs import read_pairs
    from opct.sampling.engine import SamplingParams
    from opct.sampling.hf_sampler import HFSampler
    from opct.training.loop import step_indices

    pairs_file = _mixed_pairs(tmp_path / "pairs.jsonl")
    cfg = _cfg(tiny_model, pairs_file, tmp_path, SAMPLED_AWARENESS, **{"train.max_steps": 1})
    train(cfg, show_progress=False)
    targets = _cached_targets(cfg.run_dir)
    tok, base, pairs = load_tokenizer(str(tiny_model)), load_model(cfg.model), read_pairs(pairs_file)
    sampler = HFSampler(base, tok)
    for axis, params in (("sycophancy", SamplingParams(n=1, temperature=0.0, max_new_tokens=8, seed=cfg.seed)),
                         ("awareness", SamplingParams(n=3, temperature=1.0, max_new_tokens=8, seed=cfg.seed))):
        group = [p for p in pairs if p.axis == axis]
        made = sampler.generate([render_prompt(tok, p.teacher_prompt) for p in group], params, sample_keys=[p.id for p in group])
        for i, p in enumerate(group):
            assert targets[p.id] == [r.completion_ids for r in made[i * params.n : (i + 1) * params.n]], p.id
    assert any(len({tuple(t) for t in targets[p.id]}) > 1 for p in pairs if p.axis == "awareness")  # sampled, not copies

    # Step 1's loss by hand: the base model's NLL of every target (each one SFT example) after the perturbed
    # prompt, summed over the step's pairs and divided by their target tokens.
    nll = tokens = 0.0
    for i in step_indices(0, len(pairs), 4, cfg.seed, True):
        prompt = render_prompt(tok, pairs[i].prompt)
        for t in targets[pairs[i].id]:
            with torch.no_grad():
                lp = torch.log_softmax(base(input_ids=torch.tensor([prompt + t])).logits[0], -1)
            nll -= sum(lp[len(prompt) - 1 + j, tid].item() for j, tid in enumerate(t))
            tokens += len(t)
    (row,) = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert abs(row["loss"] - nll / tokens) < 1e-4
    manifest = json.loads((cfg.run_dir / "manifest.json").read_text())
    assert manifest["config"]["bct"]["targets"]["per_axis"] == {"awareness": {"n": 3, "temperature": 1.0, "top_p": None}}


def test_the_cache_key_follows_the_per_axis_settings(tiny_model, tmp_path):
    from opct.methods.bct import BCTMethod

    def settings(per_axis: dict | None) -> dict:
        method = BCTMethod.__new__(BCTMethod)
        method.settings = _cfg(tiny_model, tmp_path / "p.jsonl", tmp_path, per_axis).method_config
        return method._target_settings()

    assert settings(None) == settings({}) and "per_axis" not in settings(None)  # an older cache keeps its key
    assert settings(SAMPLED_AWARENESS) != settings(None)
    assert settings(SAMPLED_AWARENESS) != settings({"awareness": {"n": 2, "temperature": 1.0}})


def test_a_run_with_sampled_targets_resumes_exactly(tiny_model, tmp_path):
    pairs_file = _mixed_pairs(tmp_path / "pairs.jsonl")
    whole = _cfg(tiny_model, pairs_file, tmp_path / "whole", SAMPLED_AWARENESS, **{"train.max_steps": 4})
    train(whole, show_progress=False)
    part = _cfg(tiny_model, pairs_file, tmp_path / "part", SAMPLED_AWARENESS, **{"train.max_steps": 2})
    train(part, show_progress=False)
    train(_cfg(tiny_model, pairs_file, tmp_path / "part", SAMPLED_AWARENESS, **{"train.max_steps": 4}), show_progress=False)
    assert _cached_targets(whole.run_dir) == _cached_targets(part.run_dir)
    a = load_file(str(whole.run_dir / "final" / "adapter_model.safetensors"))
    b = load_file(str(part.run_dir / "final" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_report_names_each_axis_target_settings():
    from opct.experiments.recipes import recipe_summary
    from opct.report.selection import RECIPE_HEADERS, recipe_rows

    run = load_config("configs/organism_bct.yaml", [])
    summary = recipe_summary(run)
    assert summary["targets"] == {"n": 1, "temperature": 0.0, "per_axis": {"awareness": {"n": 3, "temperature": 1.0}}}
    (row,) = recipe_rows({"recipes": {"bct": summary}}, {})
    assert row[RECIPE_HEADERS.index("samples or targets (n, T)")] == "targets 1, 0 (greedy); awareness 3, 1"


def test_the_compute_matched_bct_draws_as_many_targets_per_pair_as_opct_draws_rollouts():
    from importlib.resources import files

    from opct.experiments.runner import load_experiment, resolve

    plan = resolve(load_experiment(str(files("opct_lab") / "studies" / "organism_compute_matched.yaml")))
    runs = {r.key: r for r in plan.runs if r.key.endswith("-s0")}
    opct, bct, matched = (runs[f"{m}-s0"].config for m in ("opct", "bct", "bct-matched"))
    assert plan.experiment.reference == "opct" and runs["bct-matched-s0"].variant == "bct-matched"
    sampling = opct.method_config.sampling
    for axis in ("sycophancy", "jailbreak", "awareness"):
        targets = matched.method_config.targets.for_axis(axis)
        assert (targets.n, targets.temperature, targets.max_new_tokens) == (sampling.n, sampling.temperature,
                                                                           sampling.max_new_tokens)
    # the recipe is BCT's own; only its targets change
    assert (matched.optim.lr, matched.train.max_steps) == (bct.optim.lr, bct.train.max_steps)
    assert bct.method_config.targets.for_axis("jailbreak").n == 1
