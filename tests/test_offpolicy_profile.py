"""The off-policy profile: its measures on hand-made pairs, its forward passes against plain ones, and
``opct pairs profile`` on a tiny Llama and on a random-init Qwen3 with the real tokenizer."""

from __future__ import annotations

import json
import math
from html import unescape

import pytest
import torch
from conftest import REPO, make_pairs
from typer.testing import CliRunner

from opct.diagnostics.offpolicy import MEASURES, PairProfile, first_divergence, summarize, table_rows

MODELS = REPO.parent / "shared" / "models"


def test_first_divergence():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([4], [1, 2]) == 0
    assert first_divergence([1, 2], [1, 2, 3]) == 2  # a prefix: the shorter length
    assert first_divergence([1, 2, 3], [1]) == 1


def _pair(pid, cluster, target, answer, lps, *, rank=None, top1=None, cut=False, samples=((-0.1, -0.2),), axis="a"):
    return PairProfile(pid, axis, cluster, list(target), cut, list(answer), False, list(lps), [0.5] * len(target),
                       rank, top1, [list(s) for s in samples], [False] * len(samples))


def _values(profile, axis="a"):
    return {k: v["value"] for k, v in profile["axes"][axis]["measures"].items()}, profile["axes"][axis]["measures"]


def test_the_measures_by_hand():
    profiles = [
        _pair("equal", "c1", [5, 6, 7], [5, 6, 7], [-0.1, -0.1, -0.1]),
        # decision token at 1; the target's token there has p = 0.2; after it one token of NLL 1.0
        _pair("d1", "c2", [5, 8, 9], [5, 6, 7], [-0.1, math.log(0.2), -1.0], rank=3, top1=0.9, samples=((-3.0,),)),
        # decision token at 0 (p = 0.5), nothing after it but one token of NLL 0.7
        _pair("d0", "c3", [4, 9], [5], [math.log(0.5), -0.7], rank=2, top1=0.6),
        # cut off at the token limit: out of every sequence-level measure, in the decision-token ones
        _pair("cut", "c4", [3, 3], [5, 5], [math.log(0.1), -5.0], rank=7, top1=0.5, cut=True),
    ]
    profile = summarize(profiles)
    v, m = _values(profile)
    counts = profile["axes"]["a"]
    assert counts["pairs"] == 4 and counts["truncated_targets"] == 1 and counts["no_decision_token"] == 1
    assert v["greedy_equals_target"] == pytest.approx(1 / 3) and m["greedy_equals_target"]["n"] == 3
    assert v["divergence_position"] == pytest.approx((1 + 0 + 0) / 3) and m["divergence_position"]["n"] == 3
    assert v["target_prob_at_divergence"] == pytest.approx((0.2 + 0.5 + 0.1) / 3)
    assert v["target_rank_at_divergence"] == 3 and v["teacher_top1_at_divergence"] == pytest.approx((0.9 + 0.6 + 0.5) / 3)
    seq = [-0.3, -0.1 + math.log(0.2) - 1.0, math.log(0.5) - 0.7]  # the cut-off target is left out
    assert v["target_seq_logprob"] == pytest.approx(sum(seq) / 3) and m["target_seq_logprob"]["n"] == 3
    assert v["target_seq_logprob_median"] == pytest.approx(sorted(seq)[1])
    assert v["target_seq_prob_under_0.1"] == pytest.approx(1 / 3)  # only d1: 0.90 * 0.2 * 0.37 < 0.1
    own = [-0.3, -3.0, -0.3, -0.3]
    assert v["own_seq_logprob"] == pytest.approx(sum(own) / 4) and v["own_seq_prob_under_0.1"] == pytest.approx(1 / 4)
    assert v["own_nll_per_token"] == pytest.approx((0.3 + 3.0 + 0.3 + 0.3) / 7)
    assert v["target_nll_per_token"] == pytest.approx(-(sum(seq)) / 8)
    assert v["target_cost_after_divergence"] == pytest.approx((1.0 + 0.7 + 5.0) / 3)  # after d: d1, d0 and the cut one
    assert v["teacher_entropy"] == pytest.approx(0.5)
    for key, est in m.items():
        assert est["n"] > 0 and est["ci_low"] <= est["value"] + 1e-12 <= est["ci_high"] + 2e-12, key
    table = "\n".join(" | ".join(row) for row in table_rows(profile)[1])  # what opct pairs profile prints
    assert all(label in table for label in MEASURES.values()) and "n=3" in table


def test_a_profile_with_every_pair_equal_reports_no_decision_token_measures():
    profile = summarize([_pair(f"p{i}", f"c{i}", [1, 2], [1, 2], [-0.1, -0.1]) for i in range(4)])
    v, m = _values(profile)
    assert v["greedy_equals_target"] == 1.0 and m["divergence_position"]["n"] == 0
    assert any("n=0" in cell for row in table_rows(profile)[1] for cell in row)


def _tiny_pairs():
    from opct.pairs import ConsistencyPair

    return [ConsistencyPair(r["id"], r["prompt"], r["teacher_prompt"], r["axis"], r["meta"]) for r in make_pairs(6)]


def test_the_forward_passes_match_plain_ones(tiny_model):
    from opct.config import ModelConfig
    from opct.diagnostics.measure import _measure_chunk
    from opct.models import PromptRenderer, load_model, load_tokenizer

    spec = ModelConfig(name_or_path=str(tiny_model))
    model, tok = load_model(spec), load_tokenizer(str(tiny_model))
    model.eval()
    render = PromptRenderer.for_model(tok, spec)
    pairs = _tiny_pairs()
    with torch.no_grad():
        profiles = _measure_chunk(model, model, tok, render, pairs, 10, 2, seed=5)
        for pair, prof in zip(pairs, profiles, strict=True):
            prompt, clean = render(pair.prompt), render(pair.teacher_prompt)
            ids = torch.tensor([prompt + prof.target])
            logp = torch.log_softmax(model(input_ids=ids).logits[0, len(prompt) - 1 : -1].double(), -1)
            expected = [float(logp[t, y]) for t, y in enumerate(prof.target)]
            assert prof.target_logprobs == pytest.approx(expected, abs=1e-4)
            teacher = torch.log_softmax(model(input_ids=torch.tensor([clean + prof.target])).logits[0, len(clean) - 1 : -1].double(), -1)
            assert prof.target == [int(i) for i in teacher.argmax(-1)][: len(prof.target)]  # the teacher's greedy answer
            assert prof.teacher_entropy == pytest.approx((-(teacher.exp() * teacher).sum(-1)).tolist(), abs=1e-4)
            d = prof.divergence
            if d is not None:
                assert prof.target_rank_at_divergence == 1 + int((logp[d] > logp[d, prof.target[d]]).sum())
                assert prof.teacher_top1_at_divergence == pytest.approx(float(teacher[d].exp().max()), abs=1e-5)
            assert len(prof.sample_logprobs) == 2
    assert any(p.divergence is not None for p in profiles)


def test_above_the_logits_limit_the_profile_scores_from_hidden_states_in_chunks_with_the_same_measures(tiny_model):
    """A limit smaller than one position's logits: every target is scored from the final hidden states, a
    position at a time, and gives the whole-logits measures (rounding only); the default limit keeps the
    whole-logits pass (the organism's path, bit for bit)."""
    from opct.config import ModelConfig
    from opct.diagnostics import measure
    from opct.models import PromptRenderer, load_model, load_tokenizer

    spec = ModelConfig(name_or_path=str(tiny_model))
    model, tok = load_model(spec), load_tokenizer(str(tiny_model))
    model.eval()
    render = PromptRenderer.for_model(tok, spec)
    pairs = _tiny_pairs()
    built: list[str] = []
    plain, hidden = measure.completion_logits, measure.completion_hidden
    with torch.no_grad(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(measure, "completion_logits", lambda *a, **k: built.append("whole") or plain(*a, **k))
        mp.setattr(measure, "completion_hidden", lambda *a, **k: built.append("hidden") or hidden(*a, **k))
        whole = measure._measure_chunk(model, model, tok, render, pairs, 10, 2, seed=5)
        assert built == ["whole", "whole"]
        built.clear()
        chunked = measure._measure_chunk(model, model, tok, render, pairs, 10, 2, seed=5, whole_logits_max_mib=1e-6)
        assert built == ["hidden", "hidden"]
    assert any(p.divergence is not None for p in whole)
    for a, b in zip(whole, chunked, strict=True):
        assert (a.target, a.answer, a.sample_logprobs) == (b.target, b.answer, b.sample_logprobs)
        assert b.target_logprobs == pytest.approx(a.target_logprobs, abs=1e-5)
        assert b.teacher_entropy == pytest.approx(a.teacher_entropy, abs=1e-5)
        assert b.target_rank_at_divergence == a.target_rank_at_divergence
        assert b.teacher_top1_at_divergence == pytest.approx(a.teacher_top1_at_divergence, abs=1e-6)


def test_identical_prompts_give_a_target_equal_to_the_answer(tiny_model):
    from opct.config import ModelConfig
    from opct.diagnostics.measure import measure_profile
    from opct.models import load_model, load_tokenizer
    from opct.pairs import ConsistencyPair

    model, tok = load_model(ModelConfig(name_or_path=str(tiny_model))), load_tokenizer(str(tiny_model))
    same = [ConsistencyPair(p.id, p.teacher_prompt, p.teacher_prompt, p.axis, p.meta) for p in _tiny_pairs()]
    calls = []
    profile = measure_profile(model, tok, same, pairs_per_axis=4, max_new_tokens=8, pairs_per_batch=3,
                              progress=lambda done, total: calls.append((done, total)))
    axis = profile["axes"]["sycophancy"]
    assert axis["pairs"] == 4 and axis["no_decision_token"] == 4 and calls == [(3, 4), (4, 4)]
    complete = 4 - axis["truncated_targets"]
    assert axis["measures"]["greedy_equals_target"]["n"] == complete
    if complete:
        assert axis["measures"]["greedy_equals_target"]["value"] == 1.0


def _profile_cli(model, pairs_file, out, *extra):
    from opct.cli.main import app

    return CliRunner().invoke(app, ["pairs", "profile", "--model", str(model), "--pairs", str(pairs_file), "--n-pairs", "5",
                                    "--max-new-tokens", "6", "--out", str(out), "--no-progress", *extra])


def test_the_command_prints_the_table_and_writes_the_json(tiny_model, pairs_file, tmp_path):
    res = _profile_cli(tiny_model, pairs_file, tmp_path / "profile.json")
    assert res.exit_code == 0, res.output
    assert "sycophancy" in res.output and "greedy answer = target" in res.output
    assert "own − target sequence log-prob, nats: sycophancy" in res.output and "missing: jailbreak, awareness" in res.output
    data = json.loads((tmp_path / "profile.json").read_text())
    assert data["axes"]["sycophancy"]["pairs"] == 5 and data["pairs_per_axis"] == 5 and data["max_new_tokens"] == 6
    assert set(data["axes"]["sycophancy"]["measures"]) == set(MEASURES)
    # the dose that can move with diversity (added after the study): in the table, its line, and per pair in the JSON
    flat = " ".join(res.output.split())
    assert "target's percentile" in flat and "target: NLL per token after" in flat  # table rows (labels wrap in cells)
    assert "dose that can move with diversity (added after the study, not pre-registered" in flat
    assert data["pairs"] == [str(pairs_file)] and len(data["per_pair"]) == 5  # the sources, then each pair's record
    assert {"target_percentile_among_own", "target_cost_after_divergence"} <= set(data["per_pair"][0])


@pytest.mark.skipif(not (MODELS / "qwen3-tokenizer").exists(), reason="needs ../shared/models")
def test_the_command_runs_on_a_random_init_qwen3_with_its_real_tokenizer(pairs_file, tmp_path):
    from opct.testing import make_family_model

    model = make_family_model(MODELS / "qwen3-tokenizer", tmp_path / "qwen3", sharpen=8.0)
    res = _profile_cli(model, pairs_file, tmp_path / "profile.json")
    assert res.exit_code == 0, res.output
    axis = json.loads((tmp_path / "profile.json").read_text())["axes"]["sycophancy"]
    # random weights rarely stop within 6 tokens: a cut-off target is counted, never scored as a sequence
    assert axis["pairs"] == 5 and axis["truncated_targets"] + axis["measures"]["target_seq_logprob"]["n"] == 5
    assert axis["measures"]["teacher_entropy"]["n"] > 0 and axis["measures"]["greedy_equals_target"]["n"] <= 5


def test_the_experiment_report_shows_the_profile_of_the_runs_start(tmp_path):
    from opct.report import write_report
    from opct.runs.layout import RunLayout
    from opct.testing.synthetic_experiment import make_experiment

    exp = make_experiment(tmp_path / "exp", with_attack=False)
    profile = summarize([_pair("d1", "c2", [5, 8], [5, 6], [-0.1, math.log(0.2)], rank=3, top1=0.9, axis="awareness")],
                        {"pairs_per_axis": 100, "max_new_tokens": 48, "samples_per_pair": 1})
    for method in ("bct", "opct"):
        RunLayout(exp / "train" / method).diagnostics.write_text(json.dumps({**profile, "seconds": 1.0}))
    html, md = write_report(exp)
    for text in (html.read_text(), md.read_text()):
        assert "Off-policy profile" in text and "Measured at the start of bct, opct" in text
        assert "target's probability there" in unescape(text)  # HTML-escaped in report.html
    assert "NLL of its SFT targets" not in md.read_text()


def test_axis_less_pairs_are_profiled_per_source_and_a_limit_that_cut_every_target_says_raise_it(tiny_model, tmp_path):
    """TRL-style pairs (no axis field) from two files: one column per file, not one `unknown` column; a token
    limit of 1 cuts every target (a model emits a token before it can end), and the command says to raise it."""
    from opct.cli.main import app

    files = []
    for name in ("first.jsonl", "second.jsonl"):
        path = tmp_path / name
        rows = [{k: v for k, v in row.items() if k != "axis"} | {"id": f"{name}-{row['id']}"} for row in make_pairs(3)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        files.append(path)
    out = tmp_path / "profile.json"
    res = CliRunner().invoke(app, ["pairs", "profile", "--model", str(tiny_model), "--pairs", str(files[0]), "--pairs",
                                   str(files[1]), "--max-new-tokens", "1", "--out", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    axes = json.loads(out.read_text())["axes"]
    assert set(axes) == {str(files[0]), str(files[1])} and all(group["pairs"] == 3 for group in axes.values())
    assert "unknown" not in res.output
    for path in files:
        assert axes[str(path)]["truncated_targets"] == 3
        assert (f"{path}: all 3 targets were cut at the token limit (1 tokens)" in " ".join(res.output.split())
                and "raise --max-new-tokens" in res.output)


def test_no_note_when_some_targets_end():
    from opct.diagnostics.offpolicy import truncation_notes

    profile = summarize([_pair("a", "c1", [5], [5], [-0.1], cut=True), _pair("b", "c2", [5], [5], [-0.1])])
    assert truncation_notes({**profile, "max_new_tokens": 8}) == []
    profile = summarize([_pair("a", "c1", [5], [5], [-0.1], cut=True)])
    assert truncation_notes({**profile, "max_new_tokens": 8}) == [
        "a: all 1 targets were cut at the token limit (8 tokens), so every measure of a whole target has n=0: raise "
        "--max-new-tokens (e.g. to 16) until most targets end"]
